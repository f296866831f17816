"""Every training run's options, without torch or numpy: the one place their defaults are
written. The trainers take these configs; the CLI's options read their defaults from them
(tests/training/test_config_defaults.py checks every training command against them)."""

from qtsearch.training.configs.adapt_config import HELD_OUT, AdaptConfig
from qtsearch.training.configs.infersent_config import (
    InferSentConfig,
    MultitaskConfig,
    NLITrainConfig,
    PairsOptions,
    PairsTrainConfig,
    TeacherOptions,
)
from qtsearch.training.configs.run import SCHEDULES, TASK_SCHEDULES, RunConfig
from qtsearch.training.configs.text import (
    GRU_DEFAULTS,
    OBJECTIVE_ENCODERS,
    TRANSFORMER_DEFAULTS,
    TrainConfig,
    check_context,
)

__all__ = ["GRU_DEFAULTS", "HELD_OUT", "OBJECTIVE_ENCODERS", "SCHEDULES", "TASK_SCHEDULES",
           "TRANSFORMER_DEFAULTS", "AdaptConfig", "InferSentConfig", "MultitaskConfig",
           "NLITrainConfig", "PairsOptions", "PairsTrainConfig", "RunConfig", "TeacherOptions",
           "TrainConfig", "check_context"]
