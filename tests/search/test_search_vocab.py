"""A vocabulary for search: `train-multitask --vocab-from` adds the most frequent words of
books, Wikipedia and captions, so the words a search user types are known (lowercase, or
through the case-insensitive fallback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qtsearch.text.vocab import Vocab
from qtsearch.training.configs import MultitaskConfig, NLITrainConfig
from qtsearch.training.infersent_setup import corpus_words
from qtsearch.training.multitask import multitask_loop
from qtsearch.training.nli_trainer import nli_loop

REPO = Path(__file__).resolve().parents[2]
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"
SNLI = "nli/ketm/data/snli/test.txt"
SEARCH_WORDS = ("computer", "internet", "email", "software", "website", "dog", "beach")


def sources(data: Path) -> list[str]:
    """A book, ten Wikipedia shards (WikiExtractor markup) and a caption file."""
    wiki = [str(data / f"wikipedia/AA/wiki_0{i}.gz") for i in range(10)]
    return [str(data / BOOK), *wiki, str(data / "pairs/multi30k/test_2016.1.en.gz")]


def test_corpus_words_are_counted_once_and_kept(shared_data: Path, tmp_path: Path) -> None:
    files = [str(shared_data / "wikipedia/AA/wiki_00.gz")]
    words = corpus_words(files, 5000, tmp_path)
    assert len(words) == 5000 and words[:3] == [",", "the", "."]
    assert "curid" not in words and "</" not in words  # no WikiExtractor markup counted
    kept = list(tmp_path.glob("words-*.json"))
    assert len(kept) == 1
    kept[0].write_text('["kept"]')  # read back, not counted again
    assert corpus_words(files, 5000, tmp_path) == ["kept"]
    assert len(corpus_words(files, 100, tmp_path)) == 100  # another size: its own entry


@pytest.mark.slow
def test_vocab_from_books_wikipedia_and_captions_knows_search_words(shared_data: Path,
                                                                    tmp_path: Path) -> None:
    def base(out: Path) -> MultitaskConfig:
        return MultitaskConfig(corpus=[str(shared_data / BOOK)], split_sentences=True,
                               train=[str(shared_data / SNLI)], out=str(out), hidden=8,
                               fc_dim=8, glove_words=0, vocab_size=3000)

    without = multitask_loop(base(tmp_path / "without")).vocab
    assert not all(without.knows(w) for w in SEARCH_WORDS)  # a novel and SNLI miss them

    out = tmp_path / "with"
    args = [str(shared_data / BOOK), "--split-sentences", "--nli", str(shared_data / SNLI),
            "--out", str(out), "--hidden", "8", "--fc-dim", "8", "--glove-words", "0",
            "--vocab-size", "3000", "--max-steps", "1", "--quiet",
            "--vocab-from-words", "60000"]
    for path in sources(shared_data):
        args += ["--vocab-from", path]
    run = subprocess.run([sys.executable, str(REPO / "cli.py"), "train-multitask", *args],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    vocab = Vocab.load(out / "vocab.json")
    assert len(vocab) >= 50_000
    assert all(vocab.knows(w) for w in SEARCH_WORDS)
    assert all(w in vocab.index for w in ("computer", "internet", "email"))  # as typed
    # capitalised query words fall back to the lowercase entry and the other way round
    assert vocab.encode(["Internet", "EMAIL"], 5, fold_case=True) == [
        vocab.index["Internet"] if "Internet" in vocab.index else vocab.index["internet"],
        vocab.index["email"]]
    assert vocab.words[:len(without.words[:3000])] == without.words[:3000]  # QT ids kept

    # train-nli (and train-pairs: the same InferSent setup) take the option too
    nli = NLITrainConfig(train=[str(shared_data / SNLI)], out=str(tmp_path / "nli"),
                         glove_words=0, vocab_from=sources(shared_data), vocab_from_words=60_000)
    nli_vocab = nli_loop(nli).vocab
    assert len(nli_vocab) >= 50_000 and all(nli_vocab.knows(w) for w in SEARCH_WORDS)
