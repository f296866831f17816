"""The options of the trainers on sentence pairs: InferSent's (`train-nli`, `train-pairs`), the
pairs and teacher tasks', and the multi-task run that combines them (`train-multitask`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from qtsearch.core.errors import UsageError
from qtsearch.encoders.kinds import PAIR_ENCODERS, WORD_VECTOR_DIMS
from qtsearch.training.configs.run import TASK_SCHEDULES, RunConfig
from qtsearch.training.configs.text import check_context


@dataclass
class InferSentConfig(RunConfig):
    """The options of a run that trains InferSent on sentence pairs (NLI, paraphrases)."""

    train: list[str] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)
    valid_fraction: float = 0.1
    hidden: int = 256  # per direction; the paper's 2048 is GPU-sized
    word_dim: int = 0  # trainable embeddings concatenated to GloVe; 0 = GloVe only (the paper)
    encoder: str = PAIR_ENCODERS[0]  # or "mean": the mean of trainable word vectors
    word_vectors: str = "glove"  # the pretrained vectors (encoders/kinds.WORD_VECTOR_DIMS)
    negation_scope: bool = False  # mean only: scale words in a negation's scope
    glove_words: int = 50_000
    train_words: int = 0  # the most frequent training-sentence words kept; 0: every one
    vocab_from: list[str] = field(default_factory=list)  # more corpora for the vocabulary
    vocab_from_words: int = 50_000  # their most frequent words added
    max_len: int = 50
    batch_size: int = 64
    lr: float = 1e-3
    epochs: int = 5
    val_every: int = 200
    checkpoint_every: int = 500

    #: what the training files hold, for messages
    DATA: ClassVar[str] = "NLI"
    TRAIN_REQUIRED: ClassVar[bool] = True
    #: --vocab-from is checked through the vocabulary's size and last word (data facts)
    RESUMABLE: ClassVar[frozenset[str]] = RunConfig.RESUMABLE | {"vocab_from"}

    def check(self) -> None:
        if not self.train and self.TRAIN_REQUIRED:
            raise UsageError(f"give at least one {self.DATA} training file")
        self.check_run(("hidden", "max_len", "batch_size", "vocab_from_words"))
        if self.word_dim < 0 or self.glove_words < 0 or self.train_words < 0:
            raise UsageError("--word-dim, --glove-words and --train-words must be 0 or more")
        if not 0 < self.valid_fraction < 1:
            raise UsageError("--valid-fraction must be between 0 and 1")
        if self.encoder not in PAIR_ENCODERS:
            raise UsageError(f"--encoder must be one of {', '.join(PAIR_ENCODERS)}")
        if self.word_vectors not in WORD_VECTOR_DIMS:
            raise UsageError(f"--word-vectors must be one of {', '.join(WORD_VECTOR_DIMS)}")
        if self.encoder == "mean" and self.word_dim:
            raise UsageError("--word-dim is for --encoder infersent: the mean encoder trains "
                             "its pretrained word vectors themselves")
        if self.negation_scope and self.encoder != "mean":
            raise UsageError("--negation-scope is for --encoder mean (InferSent's BiLSTM reads "
                             "word order itself)")


@dataclass
class NLITrainConfig(InferSentConfig):
    """Everything that defines an NLI run; saved under "train" in the model's config.json."""

    fc_dim: int = 512
    dropout: float = 0.1

    def check(self) -> None:
        super().check()
        self.check_run(("fc_dim",))
        if not 0 <= self.dropout < 1:
            raise UsageError("--dropout must be in [0, 1)")


@dataclass
class PairsOptions:
    """The pairs task's options (train-pairs, train-multitask)."""

    pairs_scale: float = 20.0  # cosine × scale are the softmax logits
    hard_negatives: bool = True  # an NLI contradiction of the anchor as an extra candidate
    negations: bool = False  # else the positive's negated copy (qtsearch.text.negation)
    data: str | None = None  # data folder whose sts/ is kept out; None: $QTSEARCH_DATA, ...
    eval_filter: bool = True
    pairs_val_batches: int = 20  # validation batches (a fixed sample of the validation pairs)

    def check_pairs(self) -> None:
        if not (self.pairs_scale > 0 and math.isfinite(self.pairs_scale)):
            raise UsageError("--pairs-scale must be a positive number")
        if self.pairs_val_batches < 1:
            raise UsageError("--pairs-val-batches must be at least 1")
        if self.negations and not self.hard_negatives:
            raise UsageError("--negations makes hard negatives: it needs --hard-negatives")


@dataclass
class PairsTrainConfig(InferSentConfig, PairsOptions):
    """Everything that defines a pairs run; `train` and `valid` hold pair files."""

    batch_size: int = 128
    epochs: int = 1

    DATA = "pairs"

    def check(self) -> None:
        super().check()
        self.check_pairs()


@dataclass
class TeacherOptions:
    """The teacher task's options (train-multitask)."""

    teacher: list[str] = field(default_factory=list)  # text files or folders; none: no task
    teacher_sentences: int = 10_000  # selected from the files (cached once per selection)
    teacher_batch_size: int = 128
    teacher_val_batches: int = 8  # held-out batches (validation)
    teacher_cache: str | None = None  # None: $QTSEARCH_CACHE/teacher

    def check_teacher(self) -> None:
        for name in ("teacher_sentences", "teacher_batch_size", "teacher_val_batches"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")


@dataclass
class MultitaskConfig(NLITrainConfig, PairsOptions, TeacherOptions):
    """The NLI options plus the QT corpus, the pairs, the teacher and the schedule; `train`
    holds the NLI files."""

    corpus: list[str] = field(default_factory=list)
    split_sentences: bool = False
    vocab_size: int = 20_000  # the QT corpus's most frequent words (NLI and GloVe words added)
    qt_batch_size: int = 128
    context: int = 3
    qt_val_blocks: int = 20
    schedule: str = TASK_SCHEDULES[0]
    pairs: list[str] = field(default_factory=list)  # none: no pairs task
    pairs_valid: list[str] = field(default_factory=list)
    pairs_batch_size: int = 128
    qa: list[str] = field(default_factory=list)  # none: no question-answer task
    qa_batch_size: int = 256
    # a SQuAD answer sentence serves several questions and every pair sharing a sentence with
    # validation is dropped: a small share keeps most of the training pairs
    qa_valid_fraction: float = 0.02
    # one pass over every task's batches (NLI alone defaults to 5)
    epochs: int = 1

    #: Checked through the data facts instead: the corpus files by their signature (as in
    #: `qtsearch train`), the teacher files and cache by the selection's signature and the
    #: teacher's hash.
    RESUMABLE: ClassVar[frozenset[str]] = NLITrainConfig.RESUMABLE | {
        "corpus", "teacher", "teacher_cache"}

    #: NLI is one task among several here: a run may leave it out
    TRAIN_REQUIRED: ClassVar[bool] = False

    def check(self) -> None:
        super().check()
        if not (self.corpus or self.train or self.pairs or self.qa or self.teacher):
            raise UsageError("give at least one task's data: a corpus for Quick-Thoughts, "
                             "--nli, --pairs, --qa or --teacher")
        if not 0 < self.qa_valid_fraction < 1:
            raise UsageError("--qa-valid-fraction must be in (0, 1)")
        if self.schedule not in TASK_SCHEDULES:
            raise UsageError(f"--schedule must be one of {', '.join(TASK_SCHEDULES)}")
        check_context(self.context)
        self.check_pairs()
        self.check_teacher()
        self.check_run(("qt_batch_size", "qt_val_blocks", "pairs_batch_size", "qa_batch_size"))
