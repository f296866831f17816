"""The options of one build (`qtsearch build-index`), saved as config.json in the index folder:
the one place their defaults are written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qtsearch.index.choose import DEFAULT_FIT
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.records import PASSAGE_WORDS, RecordFields


@dataclass
class IndexConfig:
    """Options of `qtsearch build-index`, saved as config.json in the index folder."""

    corpus: list[str]
    model: str | None = None  # None: the shipped default model
    out: str | None = None  # None: indexes/<corpus name>/
    index: str = "auto"  # auto or one of qtsearch.index.names.INDEX_TYPES
    split_sentences: bool = False
    device: str = "auto"  # auto | cpu | cuda (embedding and faiss)
    precision: str = "auto"  # auto | fp32 | bf16 (embedding)
    parquet: bool = False  # also write meta.parquet
    shard_size: int = 50_000  # sentences per spooled shard (the unit of resumption)
    batch_size: int = 512  # sentences per embedding batch
    overwrite: bool = False
    fit: str = DEFAULT_FIT  # auto | none | centre | abtt:D | whiten:K (index.transform)
    input_format: str = "auto"  # auto | text | wikiextractor | records (read_options.FORMATS)
    docs: str = "file"  # running text: file | paragraph is a document (read_options.DOC_UNITS)
    passage_words: int = PASSAGE_WORDS  # records: words per passage (0: one passage a record)
    id_field: str | None = None  # records: the id, title and text fields (None: common names)
    title_field: str | None = None
    text_field: str | None = None

    def read_options(self) -> ReadOptions:
        """How the corpus is read (also what the manifest records, so that `add` reads more
        text the same way, and part of what the build's resume key depends on)."""
        return ReadOptions(split=self.split_sentences, fmt=self.input_format, docs=self.docs,
                           passage_words=self.passage_words,
                           fields=RecordFields(self.id_field, self.title_field, self.text_field))


def default_out(corpus: list[str]) -> Path:
    """indexes/<name of the first corpus path without .gz/.txt>."""
    name = Path(corpus[0]).name
    for suffix in (".gz", ".txt", ".text"):
        name = name.removesuffix(suffix)
    return Path("indexes") / (name or "corpus")
