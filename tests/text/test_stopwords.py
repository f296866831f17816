"""qtsearch.text.stopwords: NLTK's English list cut as qtsearch cuts words, "won" and "may"
kept, a few question words added; BM25's analyzer leaves them out."""

from __future__ import annotations

from qtsearch.text.stopwords import STOP_WORDS
from qtsearch.text.terms import Analyzer

#: NLTK's English stop-words (179), contractions and all.
_NLTK_TEXT = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've
now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't"""
NLTK = _NLTK_TEXT.split()
FRAME_WORDS = {"also", "could", "might", "must", "shall", "whose", "would"}


def test_nltk_s_list_split_at_apostrophes_without_won_plus_frame_words() -> None:
    assert len(NLTK) == 179
    split = {part for w in NLTK for part in w.split("'")}
    assert (split - {"won"}) | FRAME_WORDS == STOP_WORDS
    assert len(STOP_WORDS) == 159


def test_words_that_carry_meaning_stay() -> None:
    assert {"won", "may", "nobel", "prize", "cat"}.isdisjoint(STOP_WORDS)
    assert {"don", "t", "what", "who", "how", "the"} <= STOP_WORDS
    assert all(w == w.lower() and w.isalpha() for w in STOP_WORDS)
    assert isinstance(STOP_WORDS, frozenset)


def test_bm25_terms_leave_the_stop_words_out() -> None:
    analyzer = Analyzer()
    assert analyzer.terms("What is the Nobel Prize he won in May?") == ["nobel", "prize", "won",
                                                                         "may"]
    assert analyzer.terms("Who would do that, and why don't they?") == []
