"""The options of `qtsearch train` (Quick-Thoughts, FastSent, SDAE on ordered text) and the
defaults that depend on the objective and the encoder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from qtsearch.core.errors import UsageError
from qtsearch.encoders.kinds import QT_ENCODERS
from qtsearch.training.configs.run import RunConfig

#: The encoders each objective can train, the first being its default.
OBJECTIVE_ENCODERS = {
    "qt": QT_ENCODERS,
    "fastsent": ("bow",),  # FastSent is a bag of words by definition
    "sdae": ("uni", "bi"),
}
#: What --hidden, --warmup-steps and --lr-schedule default to, by encoder.
TRANSFORMER_DEFAULTS = {"hidden": 512, "warmup_steps": 1000, "lr_schedule": "inverse-sqrt"}
GRU_DEFAULTS = {"hidden": 1000, "warmup_steps": 0, "lr_schedule": "constant"}


def check_context(context: int) -> None:
    if context < 3 or context % 2 == 0:
        raise UsageError("--context must be an odd number ≥ 3 (3 = previous and next sentence)")


@dataclass
class TrainConfig(RunConfig):
    """Everything that defines a training run on ordered text; saved in the model's config.json.

    None (encoder, hidden, warm-up, schedule) means the default of the objective and encoder:
    see OBJECTIVE_ENCODERS, TRANSFORMER_DEFAULTS and GRU_DEFAULTS.
    """

    corpus: list[str] = field(default_factory=list)
    objective: str = "qt"
    encoder: str | None = None
    hidden: int | None = None
    word_dim: int = 300
    vocab_size: int = 50_000
    max_len: int = 50
    context: int = 3
    batch_size: int = 400
    split_sentences: bool = False
    val_blocks: int = 50
    layers: int = 4  # transformer
    heads: int = 8  # transformer
    fastsent_ae: bool = False
    word_dropout: float = 0.1  # SDAE p0
    swap_prob: float = 0.1  # SDAE px

    #: The corpus files are checked through their signature (resolved path, size, time), so
    #: the same files named by another relative path still resume.
    RESUMABLE: ClassVar[frozenset[str]] = RunConfig.RESUMABLE | {"corpus"}

    def __post_init__(self) -> None:
        if self.encoder is None and self.objective in OBJECTIVE_ENCODERS:
            self.encoder = OBJECTIVE_ENCODERS[self.objective][0]
        defaults = TRANSFORMER_DEFAULTS if self.encoder == "transformer" else GRU_DEFAULTS
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def check(self) -> None:
        if self.objective not in OBJECTIVE_ENCODERS:
            raise UsageError(f"--objective must be one of {', '.join(OBJECTIVE_ENCODERS)}, "
                             f"not {self.objective!r}")
        allowed = OBJECTIVE_ENCODERS[self.objective]
        if self.encoder not in allowed:
            raise UsageError(f"--encoder for --objective {self.objective} must be one of "
                             f"{', '.join(allowed)}, not {self.encoder!r}")
        for name in ("word_dropout", "swap_prob"):
            if not 0 <= getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be in [0, 1)")
        check_context(self.context)
        self.check_run(("hidden", "word_dim", "vocab_size", "max_len", "batch_size",
                        "val_blocks", "layers", "heads"))
        if self.batch_size < self.context:
            raise UsageError("--batch-size must be larger than --context")
        if self.encoder == "transformer" and self.hidden % self.heads:
            raise UsageError("--heads must divide --hidden (the transformer's d_model)")
