"""Word pairs of the Google and MSR word-analogy sets, each with its category.

Google (`questions-words.txt`): a question `a b c d` gives the pairs (a, b) and (c, d); its
`: section` is the category (`family`, `gram3-comparative`, …). Words are lowercased (Yelp is).

MSR (`msr.txt`) has no labels. The original set is built from Penn-Treebank form pairs
(JJ/JJR, JJ/JJS, JJR/JJS, NN/NNS, NN/NNPOS, VB/VBD, VB/VBZ, VBD/VBZ, in both directions), and
the category is inferred from the word forms by this rule (documented in
benchmarks/analogy/README.md):

1. Regular morphology of the pair (a, b), tried in both directions: b = a+'s → NN/NNPOS;
   a + -ed/-d/-ied/doubled consonant+ed → VB/VBD; + -er → JJ/JJR; + -est → JJ/JJS;
   a = stem+er, b = stem+est → JJR/JJS; a a past form and b an -s form of one stem → VBD/VBZ;
   b = a + -s/-es/-ies → "-s form" (plural noun or third-person verb: undecided yet).
2. Irregular pairs (good/better, win/won) take the category of the other pair of the same
   question: both pairs of an MSR question always share one.
3. An "-s form" pair has verb evidence when its base word is the base of some VB/VBD pair or
   its -s form appears in some VBD/VBZ pair (the MSR verbs come in such triples). It is VB/VBZ
   when at least half of the votes say verb: its own evidence and that of each "-s form" pair it
   shares a question with (words like "report" are both noun and verb, so one is not enough);
   else NN/NNS. Then step 2 runs again.
Pairs are stored in the category's direction (base → derived: good → better), since a sentence
analogy is asked both ways anyway; a pair left without category is dropped and counted.
A word pair that is in both sets keeps its Google section.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from qtsearch.core.errors import InputError

MSR_CATEGORIES = ("JJ/JJR", "JJ/JJS", "JJR/JJS", "NN/NNS", "NN/NNPOS", "VB/VBD", "VB/VBZ",
                  "VBD/VBZ")
S_FORM = "-s form"  # an undecided NN/NNS or VB/VBZ pair

WordPair = tuple[str, str]


@dataclass
class WordPairs:
    """(w1, w2) → category, plus how many MSR pairs could not be categorised."""

    category: dict[WordPair, str] = field(default_factory=dict)
    source: dict[WordPair, str] = field(default_factory=dict)  # "google" | "msr"
    msr_unresolved: int = 0

    def categories(self) -> list[str]:
        return sorted(set(self.category.values()))

    def counts(self) -> Counter[str]:
        return Counter(self.category.values())


def _suffixed(a: str, suffix: str) -> set[str]:
    """Regular forms of `a` + suffix ("ed", "er", "est"): spelling rules of English."""
    forms = {a + suffix}
    if a.endswith("e"):
        forms.add(a + suffix[1:])
    if len(a) > 2 and a.endswith("y") and a[-2] not in "aeiou":
        forms.add(a[:-1] + "i" + suffix)
    if len(a) > 2 and a[-1] not in "aeiouwxy" and a[-2] in "aeiou":
        forms.add(a + a[-1] + suffix)
    return forms


def _s_forms(a: str) -> set[str]:
    forms = {a + "s", a + "es"}
    if len(a) > 2 and a.endswith("y") and a[-2] not in "aeiou":
        forms.add(a[:-1] + "ies")
    return forms


def _stems(form: str, suffix: str) -> set[str]:
    """Candidate base words whose regular `suffix` form could be `form`."""
    if not form.endswith(suffix):
        return set()
    cut = form[: -len(suffix)]
    out = {cut, cut + "e", cut[:-1]} if cut else set()
    if cut.endswith("i"):
        out.add(cut[:-1] + "y")
    return {s for s in out if s and form in _suffixed(s, suffix)}


def _forward_label(a: str, b: str) -> str | None:
    """The category of a → b from regular morphology alone, or None."""
    if b in (a + "'s", a + "'"):
        return "NN/NNPOS"
    if b in _suffixed(a, "ed"):
        return "VB/VBD"
    if b in _suffixed(a, "er"):
        return "JJ/JJR"
    if b in _suffixed(a, "est"):
        return "JJ/JJS"
    if _stems(a, "er") & _stems(b, "est"):
        return "JJR/JJS"
    stems = _stems(a, "ed")
    if b not in stems and any(b in _s_forms(stem) for stem in stems):  # discussed → discuss
        return "VBD/VBZ"
    if b in _s_forms(a):
        return S_FORM
    return None


def morphology_label(a: str, b: str) -> tuple[str, bool] | None:
    """(category, reversed) of the pair a → b: reversed means b → a is the category's direction."""
    label = _forward_label(a, b)
    if label is not None:
        return label, False
    label = _forward_label(b, a)
    return (label, True) if label is not None else None


def read_google(path: Path) -> list[tuple[str, WordPair, WordPair]]:
    """(section, (a, b), (c, d)) for each question, lowercased."""
    out = []
    section = None
    for n, line in enumerate(_lines(path), 1):
        if line.startswith(":"):
            section = line[1:].strip()
            continue
        words = line.lower().split()
        if len(words) != 4 or section is None:
            raise InputError(f"{path}:{n}: expected ': section' or four words")
        out.append((section, (words[0], words[1]), (words[2], words[3])))
    return out


def read_msr(path: Path) -> list[tuple[WordPair, WordPair]]:
    out = []
    for n, line in enumerate(_lines(path), 1):
        words = line.lower().split()
        if len(words) != 4:
            raise InputError(f"{path}:{n}: expected four words")
        out.append(((words[0], words[1]), (words[2], words[3])))
    return out


def _lines(path: Path) -> Iterable[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise InputError(f"{path}: word-analogy file not found") from e
    return (line.strip() for line in text.splitlines() if line.strip())


def _propagate(questions: list[tuple[WordPair, WordPair]],
               labels: dict[WordPair, tuple[str, bool]]) -> None:
    """Step 2: a pair without a (decided) label takes the other pair's, same orientation."""
    for p, q in questions:
        for x, y in ((p, q), (q, p)):
            lx, ly = labels.get(x), labels.get(y)
            if ly is not None and ly[0] != S_FORM and (lx is None or lx[0] == S_FORM):
                labels[x] = ly


def categorise_msr(questions: list[tuple[WordPair, WordPair]]) -> tuple[dict[WordPair, str], int]:
    """Canonical (base → derived) pair → MSR category, and the number of pairs left unlabelled."""
    pairs = sorted({p for q in questions for p in q})
    labels = {p: lab for p in pairs if (lab := morphology_label(*p)) is not None}
    _propagate(questions, labels)

    def canonical(p: WordPair, rev: bool) -> WordPair:
        return (p[1], p[0]) if rev else p

    verb_bases = {canonical(p, r)[0] for p, (c, r) in labels.items() if c == "VB/VBD"}
    verb_s = {canonical(p, r)[1] for p, (c, r) in labels.items() if c == "VBD/VBZ"}
    evidence = {p: canonical(p, r)[0] in verb_bases or canonical(p, r)[1] in verb_s
                for p, (c, r) in labels.items() if c == S_FORM}
    votes: dict[WordPair, list[bool]] = {p: [e] for p, e in evidence.items()}
    for p, q in questions:
        if p in evidence and q in evidence:
            votes[p].append(evidence[q])
            votes[q].append(evidence[p])
    for p, v in votes.items():
        labels[p] = ("VB/VBZ" if 2 * sum(v) >= len(v) else "NN/NNS", labels[p][1])
    _propagate(questions, labels)
    out = {canonical(p, r): c for p, (c, r) in labels.items()}
    return out, len(pairs) - len(labels)


def load_word_pairs(analogy_dir: Path) -> WordPairs:
    """All categorised word pairs of `questions-words.txt` and `msr.txt` in `analogy_dir`."""
    result = WordPairs()
    for section, p, q in read_google(Path(analogy_dir) / "questions-words.txt"):
        for pair in (p, q):
            result.category.setdefault(pair, section)
            result.source.setdefault(pair, "google")
    msr, result.msr_unresolved = categorise_msr(read_msr(Path(analogy_dir) / "msr.txt"))
    for pair, cat in sorted(msr.items()):
        if pair not in result.category and (pair[1], pair[0]) not in result.category:
            result.category[pair] = cat
            result.source[pair] = "msr"
    return result
