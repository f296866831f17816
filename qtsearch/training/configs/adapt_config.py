"""The options of `qtsearch adapt`: fitting a mean-of-words model to a corpus, without labels."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from qtsearch.core.errors import UsageError
from qtsearch.training.configs.run import RunConfig

#: Every HELD_OUT-th document is kept out of training and validates every task.
HELD_OUT = 20

@dataclass
class AdaptConfig(RunConfig):
    """Everything that defines an adaptation; saved in the checkpoint and config.json."""

    corpus: list[str] = field(default_factory=list)
    model: str | None = None  # the base model folder; None: the shipped default
    split_sentences: bool = True  # text files are running text (records always are)
    new_words: int = 50_000  # at most this many corpus words added, most frequent first
    min_count: int = 2  # a corpus word needs this many occurrences to get a row
    neighbours: bool = True
    titles: bool = True
    ict: bool = True
    teacher: str | None = None  # "minilm": learn MiniLM's vectors of a corpus sample
    teacher_budget: float = 600.0  # seconds of teacher encoding at most
    # not "…_sentences": `info` lists such fields as training data, and this is only a cap
    teacher_sample: int = 20_000  # teacher sentences at most
    anchor: float = 0.0  # weight of the squared distance of base rows from the base
    batch_size: int = 256
    scale: float = 20.0  # cosine × scale are the contrastive logits
    doc_len: int = 256  # tokens of a document's rest in the inverse-cloze task
    max_len: int | None = None  # tokens of a training sentence; None: the base's
    max_minutes: float | None = None  # stop cleanly (model saved) after this long
    lr: float = 3e-3
    epochs: int = 3
    val_every: int = 100
    checkpoint_every: int = 100

    RESUMABLE: ClassVar[frozenset[str]] = RunConfig.RESUMABLE | {"max_minutes", "teacher_budget"}

    def check(self) -> None:
        if not self.corpus:
            raise UsageError("give the corpus to adapt to: text files, folders or JSON Lines "
                             "records")
        self.check_run(("batch_size", "new_words", "min_count", "doc_len", "teacher_sample"))
        if self.teacher not in (None, "minilm"):
            raise UsageError("--teacher must be minilm (the only teacher)")
        if not (self.anchor >= 0 and math.isfinite(self.anchor)):
            raise UsageError("--anchor must be 0 or more")
        if not (self.scale > 0 and math.isfinite(self.scale)):
            raise UsageError("--scale must be a positive number")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise UsageError("--max-minutes must be a positive number")
        if self.max_len is not None and self.max_len < 1:
            raise UsageError("--max-len must be at least 1")
        if not (self.neighbours or self.titles or self.ict or self.teacher):
            raise UsageError("every task is switched off: keep at least one of neighbours, "
                             "titles, ict or --teacher")
