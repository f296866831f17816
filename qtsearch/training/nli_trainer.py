"""`qtsearch train-nli`: an InferSent encoder trained on NLI pairs, in the one loop.

Data: labelled pairs from any of the layouts of `qtsearch.text.datasets.nli_data`, split as
objectives/entailment says.
Optimiser: Adam (lr 1e-3) rather than the paper's SGD (lr 0.1, decayed over ~20 epochs of
570k pairs): the data reachable here is ~15k pairs and a run has minutes, where Adam converges
in a few epochs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.infersent import InferSent, NLIClassifier
from qtsearch.text.datasets.nli_data import NLIPair, label_counts, read_nli
from qtsearch.text.vocab import Vocab
from qtsearch.training.configs import NLITrainConfig
from qtsearch.training.distributed import first_rank_only
from qtsearch.training.infersent_setup import Split, infersent_loop
from qtsearch.training.loop import Loop, RunResult, Runtime
from qtsearch.training.objectives.entailment import NLISet, NLITask, split_by_premise


def nli_split(config: NLITrainConfig, pairs: list[NLIPair], display: Reporter) -> Split[NLIPair]:
    """Training and validation pairs: --valid files, or held-out premises."""
    if config.valid:
        train, valid = pairs, read_nli(config.valid)
    else:
        train, valid = split_by_premise(pairs, config.valid_fraction, config.seed)
    dropped = 0 if config.valid else len(pairs) - len(train) - len(valid)
    display.note(f"NLI: {len(train):,} training pairs, {len(valid):,} validation pairs "
                 f"({'--valid' if config.valid else 'held-out premises'}, {dropped:,} dropped "
                 "for sharing a sentence with validation)")
    return Split(train, valid, {"train_pairs": len(train), "valid_pairs": len(valid),
                                "dropped_pairs": dropped, "train_labels": label_counts(train),
                                "valid_labels": label_counts(valid)})


def nli_sentences(pairs: list[NLIPair]) -> Iterator[str]:
    for p in pairs:
        yield p.premise
        yield p.hypothesis


def nli_task(config: NLITrainConfig, split: Split[NLIPair], vocab: Vocab,
             tokens: Callable[[str], list[str]], encoder: InferSent,
             runtime: Runtime) -> NLITask:
    """The NLI task on the encoded pairs, with a fresh classifier on `encoder`."""
    head = NLIClassifier(encoder.dim, config.fc_dim, config.dropout).to(runtime.device)
    train, valid = (NLISet.encode(s, vocab, config.max_len, tokens)
                    for s in (split.train, split.valid))
    return NLITask(train, valid, config.batch_size, config.seed, encoder, head, runtime)


def nli_loop(config: NLITrainConfig, reporter: Reporter | None = None) -> Loop:
    """Everything of a run but the running: pairs read and encoded, model built, loop ready."""
    return infersent_loop(config, "nli", read_nli, functools.partial(nli_split, config),
                          nli_sentences, functools.partial(nli_task, config),
                          first_rank_only(reporter))


def train_nli(config: NLITrainConfig, resume: bool = False,
              reporter: Reporter | None = None) -> RunResult:
    """Train InferSent into `config.out` (a model folder `load_encoder` reads)."""
    return nli_loop(config, reporter).run(resume)
