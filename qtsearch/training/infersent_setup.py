"""The InferSent encoder over GloVe, its vocabulary and the one-task setup of the runs that
train it on sentence pairs (NLI, paraphrases; their options: configs.InferSentConfig); the
multi-task trainer shares the encoder and the vocabulary.

Vocabulary: every word of the training sentences (case kept, as the tokeniser gives it) followed
by the most frequent GloVe words in lowercase and capitalised form, so that sentences of other
domains (`qtsearch eval`, indexes) still meet their words' GloVe vectors; `extra` words (the
most frequent words of other corpora, `corpus_words`: books, Wikipedia, captions) come between
the two, so the words a search user types are known. Trainable embedding
rows (`word_dim` > 0) of words never seen in training stay zero: only GloVe speaks for them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
from torch import Tensor, nn

from qtsearch.core.config import write_json_atomic
from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.folder import build_model
from qtsearch.encoders.nn.infersent import InferSent
from qtsearch.encoders.nn.mean_words import MeanWords
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig
from qtsearch.encoders.pretrained import WORD_VECTORS, load_glove, word_matrix
from qtsearch.text.reader import read_sentences
from qtsearch.text.token_corpus import corpus_signature
from qtsearch.text.tokenizer import tokenize
from qtsearch.text.vocab import PAD, UNK, Vocab
from qtsearch.training.checkpoint import writable_folder
from qtsearch.training.configs import InferSentConfig
from qtsearch.training.loop import Loop, Runtime, Task

T = TypeVar("T")


def pair_encoder_config(config: InferSentConfig, vocab_len: int,
                        objective: str) -> EncoderConfig:
    """The sentence encoder `config` trains for `objective` (nli, pairs, multitask)."""
    return EncoderConfig(encoder=config.encoder, objective=objective, vocab_size=vocab_len,
                         word_dim=config.word_dim, hidden=config.hidden, max_len=config.max_len,
                         glove_dim=WORD_VECTORS[config.word_vectors][0],
                         negation_scope=config.negation_scope)


@dataclass
class Split(Generic[T]):
    """One task's training and validation items, and the facts of the split (counts: checked
    on --resume, kept in config.json)."""

    train: list[T]
    valid: list[T]
    facts: dict[str, Any]


def corpus_words(paths: Sequence[str], size: int, cache: Path) -> list[str]:
    """The `size` most frequent words (case kept, as the tokeniser gives them) of text files or
    folders read as running text, WikiExtractor markup dropped; kept in `cache` under the files'
    signature (their contents), so a resumed run does not read books + Wikipedia again."""
    path = cache / f"words-{corpus_signature(paths, True, size, 0)}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    counted = Vocab.build((tokenize(s.text) for s in read_sentences(paths, split=True)), size)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, counted.words[2:])
    return counted.words[2:]


def build_vocab(
    token_lists: Iterable[list[str]], glove_words: int, base: Vocab | None = None,
    extra: Sequence[str] = (), train_words: int = 0,
) -> tuple[Vocab, int]:
    """(vocabulary, n_seen): `base` (or <pad>, <unk>) + the words of `token_lists` by frequency
    (the `train_words` most frequent; 0: all) + the `extra` words + the `glove_words` most
    frequent GloVe words, lowercase and capitalised. Ids below n_seen are words that training
    data contains. A cap keeps a shipped word table small: the rarest words of 200k Wikipedia
    sentences are mostly names seen once."""
    seen = Vocab.build(token_lists, size=train_words or 10**9).words[2:]
    words = list(base.words) if base else [PAD, UNK]
    known = set(words)
    for w in seen:
        if w not in known:
            known.add(w)
            words.append(w)
    n_seen = len(words)
    later = list(extra)
    if glove_words:
        index, _ = load_glove()
        for w in sorted(index, key=index.__getitem__)[:glove_words]:
            later += (w, w.capitalize())
    for w in later:
        if w not in known:
            known.add(w)
            words.append(w)
    return Vocab(words), n_seen


def pairs_vocab(sentences: Iterable[str], config: InferSentConfig, display: Reporter,
                base: Vocab | None = None,
                ) -> tuple[Vocab, int, Callable[[str], list[str]], dict[str, Any]]:
    """`build_vocab` over the training sentences, the --vocab-from words and GloVe's; also the
    tokeniser (cached: a sentence recurs across pairs) that encodes them, and the facts that
    identify --vocab-from's words on --resume (none without it: older checkpoints resume)."""
    tokens = functools.cache(tokenize)
    extra = corpus_words(config.vocab_from, config.vocab_from_words,
                         Path(config.out) / "cache") if config.vocab_from else []
    vocab, n_seen = build_vocab(map(tokens, sentences), config.glove_words, base, extra,
                                config.train_words)
    display.note(f"vocabulary {len(vocab):,} words ({n_seen:,} seen in training)")
    facts = {"vocab_words": len(vocab), "vocab_last": vocab.words[-1]} if extra else {}
    return vocab, n_seen, tokens, facts


def pretrained_vectors(source: str, vocab: Vocab, display: Reporter) -> Tensor:
    """The --word-vectors rows of the vocabulary (zeros for words the source lacks)."""
    matrix, coverage = word_matrix(source, vocab.words)
    display.note(f"{source} vectors for {100 * coverage:.1f}% of the vocabulary")
    return torch.from_numpy(matrix)


def sentence_encoder(cfg: EncoderConfig, vocab: Vocab, n_seen: int,
                     pretrained: Tensor) -> nn.Module:
    """A fresh encoder of `cfg.encoder` over the pretrained word vectors; InferSent's trainable
    rows of words unseen in training zeroed."""
    model = build_model(cfg)
    model.set_frozen_vectors(pretrained)
    if isinstance(model, MeanWords):
        model.set_vocab(vocab)
    if isinstance(model, InferSent) and model.words is not None:
        with torch.no_grad():
            model.words.weight[n_seen:].zero_()
    return model


def infersent_loop(
    config: InferSentConfig, objective: str, read: Callable[[list[str]], list[T]],
    split: Callable[[list[T], Reporter], Split[T]], sentences: Callable[[list[T]], Iterable[str]],
    task: Callable[[Split[T], Vocab, Callable[[str], list[str]], InferSent, Runtime], Task],
    display: Reporter,
) -> Loop:
    """A one-task run of InferSent on sentence pairs: the `train` files read and split, the
    vocabulary built from the training sentences, the encoder seeded, the task made on it."""
    config.check()
    runtime = Runtime.of(config)
    items = read(config.train)
    writable_folder(Path(config.out))
    data = split(items, display)
    vocab, n_seen, tokens, facts = pairs_vocab(sentences(data.train), config, display)
    torch.manual_seed(config.seed)
    encoder = sentence_encoder(pair_encoder_config(config, len(vocab), objective), vocab, n_seen,
                               pretrained_vectors(config.word_vectors, vocab, display)
                               ).to(runtime.device)
    return Loop(config, runtime, display, encoder, vocab,
                [task(data, vocab, tokens, encoder, runtime)], data.facts | facts)
