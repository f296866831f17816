"""`qtsearch train-pairs`: an InferSent encoder trained on paraphrase pairs (captions of one
image, entailed NLI hypotheses) by in-batch contrastive learning, in the one loop; the same
task serves `train-multitask --pairs`.

Every pair that shares a sentence with an evaluation file under the data folder's `sts/`
(STS 2012–2016, STS-B, SICK, MSRP) is dropped before anything else, and the count is reported
and kept in config.json; validation is a --valid file (for Multi30k, its val split) or a
held-out share of the anchors, with training pairs sharing a sentence with it dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from torch import nn

from qtsearch.core.paths import data_root
from qtsearch.core.progress import Reporter
from qtsearch.text.datasets.paraphrase_data import (
    P,
    Pair,
    drop_overlap,
    eval_sentences,
    hold_out,
    read_pairs,
)
from qtsearch.text.negation import with_negations
from qtsearch.text.vocab import Vocab
from qtsearch.training.configs import PairsOptions, PairsTrainConfig
from qtsearch.training.distributed import first_rank_only
from qtsearch.training.infersent_setup import Split, infersent_loop
from qtsearch.training.loop import Loop, RunResult, Runtime
from qtsearch.training.objectives.contrastive import PairSet, PairsTask


def without_eval_sentences(items: list[P], options: PairsOptions) -> tuple[list[P], int, str]:
    """(the items none of whose sentences is in an evaluation file under the data folder's
    sts/, how many were dropped, where they were checked); all kept with --no-eval-filter.
    Paraphrase pairs and (in train-multitask) NLI pairs go through it."""
    if not options.eval_filter:
        return items, 0, "not checked (--no-eval-filter)"
    folder = data_root(options.data, need="sts")
    kept, dropped = drop_overlap(items, eval_sentences(folder))
    return kept, dropped, f"with the evaluation files under {folder}"


def held_out_sentences(options: PairsOptions) -> frozenset[str]:
    """The normalised evaluation sentences training must not see (none with --no-eval-filter)."""
    if not options.eval_filter:
        return frozenset()
    return eval_sentences(data_root(options.data, need="sts"))


def pairs_split(pairs: list[Pair], valid_files: list[str], fraction: float, seed: int,
                options: PairsOptions, display: Reporter) -> Split[Pair]:
    """Evaluation sentences dropped, then training and validation pairs: --valid files, or
    held-out anchors."""
    pairs, dropped_eval, where = without_eval_sentences(pairs, options)
    if valid_files:
        train, valid = pairs, read_pairs(valid_files)
    else:
        train, valid = hold_out(pairs, lambda p: p.anchor, Pair.sentences, fraction, seed)
    dropped_valid = 0 if valid_files else len(pairs) - len(train) - len(valid)
    negations: dict[str, int] = {}
    if options.negations:
        train, added, held_back = with_negations(train, held_out_sentences(options))
        negations = {"pairs_negations": added, "pairs_negations_held_back": held_back}
    negatives = sum(p.negative is not None for p in train)
    made = (f", {negations['pairs_negations']:,} of them a negated positive "
            f"({negations['pairs_negations_held_back']:,} negations left out: an evaluation "
            "sentence)" if negations else "")
    display.note(f"pairs: {len(train):,} training pairs ({negatives:,} with a hard negative"
                 f"{made}), {len(valid):,} validation pairs; dropped for sharing a sentence: "
                 f"{dropped_eval:,} {where}, {dropped_valid:,} with validation")
    return Split(train, valid, {"pairs_train": len(train), "pairs_valid": len(valid),
                                "pairs_negatives": negatives, "pairs_dropped_eval": dropped_eval,
                                "pairs_dropped_valid": dropped_valid, **negations})


def qa_split(pairs: list[Pair], fraction: float, seed: int, options: PairsOptions,
             display: Reporter) -> Split[Pair]:
    """Question → answer pairs for the qa task: evaluation sentences dropped, a share of the
    questions held out for validation (pairs sharing a sentence with them dropped)."""
    pairs, dropped_eval, where = without_eval_sentences(pairs, options)
    train, valid = hold_out(pairs, lambda p: p.anchor, Pair.sentences, fraction, seed,
                            "questions")
    negatives = sum(p.negative is not None for p in train)
    dropped_valid = len(pairs) - len(train) - len(valid)
    display.note(f"qa: {len(train):,} training pairs ({negatives:,} with a near miss), "
                 f"{len(valid):,} validation pairs; dropped for sharing a sentence: "
                 f"{dropped_eval:,} {where}, {dropped_valid:,} with validation")
    return Split(train, valid, {"qa_train": len(train), "qa_valid": len(valid),
                                "qa_negatives": negatives, "qa_dropped_eval": dropped_eval,
                                "qa_dropped_valid": dropped_valid})


def pair_sentences(pairs: list[Pair]) -> Iterator[str]:
    for p in pairs:
        yield from p.sentences()


def pairs_task(options: PairsOptions, split: Split[Pair], vocab: Vocab, max_len: int,
               tokens: Callable[[str], list[str]], batch_size: int, seed: int,
               encoder: nn.Module, runtime: Runtime, name: str = "pairs") -> PairsTask:
    """The pairs task (or, named "qa", the question-answer task) on the encoded pairs."""
    train, valid = (PairSet.encode(s, vocab, max_len, tokens, options.hard_negatives)
                    for s in (split.train, split.valid))
    return PairsTask(train, valid, batch_size, seed, encoder, options.pairs_scale,
                     options.pairs_val_batches, runtime, name)


def pairs_loop(config: PairsTrainConfig, reporter: Reporter | None = None) -> Loop:
    """Everything of a run but the running: pairs read, filtered and encoded, model built."""

    def split(pairs: list[Pair], display: Reporter) -> Split[Pair]:
        return pairs_split(pairs, config.valid, config.valid_fraction, config.seed, config,
                           display)

    def task(split: Split[Pair], vocab: Vocab, tokens: Callable[[str], list[str]],
             encoder: nn.Module, runtime: Runtime) -> PairsTask:
        return pairs_task(config, split, vocab, config.max_len, tokens, config.batch_size,
                          config.seed, encoder, runtime)

    return infersent_loop(config, "pairs", read_pairs, split, pair_sentences, task,
                          first_rank_only(reporter))


def train_pairs(config: PairsTrainConfig, resume: bool = False,
                reporter: Reporter | None = None) -> RunResult:
    """Train InferSent on paraphrase pairs into `config.out` (a model folder)."""
    return pairs_loop(config, reporter).run(resume)
