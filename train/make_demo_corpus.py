"""How the bundled demo corpus (qtsearch/app/demo/wikitext2.txt.gz) was made.

Source: ../shared/data/wikitext2/{valid,test}.txt, the WikiText-2 validation and test articles
(CC BY-SA 3.0, Merity et al. 2016). Each article (a ` = Title = ` heading) becomes a document;
paragraphs are de-tokenised (WikiText's " @-@ ", " , " …), split into sentences, written one per
line with a blank line between articles. Sentences holding WikiText's <unk> placeholder are
dropped so search results read as real text. Run: python train/make_demo_corpus.py
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from qtsearch.text.splitter import split_sentences

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO.parent / "shared" / "data" / "wikitext2"
OUT = REPO / "qtsearch" / "demo" / "wikitext2.txt.gz"

_FIXES = [
    (re.compile(r" @(.)@ "), r"\1"),  # 1 @,@ 000 → 1,000; state @-@ of → state-of
    (re.compile(r" ([.,;:!?%)\]}])"), r"\1"),
    (re.compile(r"([(\[{$]) "), r"\1"),
    (re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b"), r"\1"),
    (re.compile(r'" (.*?) "'), r'"\1"'),
]


def detokenize(text: str) -> str:
    for pattern, repl in _FIXES:
        text = pattern.sub(repl, text)
    return text.strip()


def articles(path: Path):
    title, paras = None, []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if re.fullmatch(r"= [^=].* =", line):
            if title and paras:
                yield title, paras
            title, paras = line.strip("= "), []
        elif line and not line.startswith("="):
            paras.append(detokenize(line))
    if title and paras:
        yield title, paras


def main() -> None:
    n_docs = n_sent = 0
    with gzip.open(OUT, "wt", encoding="utf-8", compresslevel=9) as fh:
        for name in ("valid.txt", "test.txt"):
            for _, paras in articles(SOURCE / name):
                kept = [s for p in paras for _, s in split_sentences(p) if "<unk>" not in s]
                if not kept:
                    continue
                fh.write("\n".join(kept) + "\n\n")
                n_docs += 1
                n_sent += len(kept)
    print(f"{OUT}: {n_docs} articles, {n_sent} sentences")


if __name__ == "__main__":
    main()
