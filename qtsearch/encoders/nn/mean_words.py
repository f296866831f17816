"""The mean-of-words encoder: a sentence vector is the mean of its words' trainable vectors.

It is the fast end of the trained encoders (a table lookup and a mean: no recurrence), and it
is made good by where it starts and what trains it: its table starts from pretrained word
vectors (`--word-vectors model2vec`: MiniLM's knowledge of words, distilled) and the trainers of
sentence pairs (`train-pairs`, `train-nli`, `train-multitask`) then tune every row against
paraphrases, NLI, Quick-Thoughts neighbours and MiniLM's sentence vectors. It has the
interface of `InferSent` (`cfg`, `dim`, `embed`, `set_frozen_vectors`), so every trainer and
`load_encoder` take it by `--encoder mean`.

A bag of words cannot tell "A man is playing a guitar" from "A man is not playing a guitar"
except by the vector of "not", and a "not" long enough to part them pulls every negated
sentence towards every other (STS12 and STS16 scores fell when negations trained it).
With `negation_scope`, the words in a negation's scope (after "not", "no", "never"… up to the
next punctuation; qtsearch.text.negation) are scaled by a trained vector instead, and the cue
words themselves count as zero vectors: a negated sentence moves away from its positive form
by its own words, and two negated sentences share nothing for being negated.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from qtsearch.encoders.base import LEAD_TOKENS, TAIL_WEIGHT
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig
from qtsearch.text.negation import CUE, END, word_roles
from qtsearch.text.vocab import Vocab


class MeanWords(nn.Module):
    """Mean of trainable word vectors (`glove_dim` wide: the width of the pretrained ones)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        if cfg.encoder != "mean":
            raise ValueError(f"a mean-of-words model's encoder is 'mean', not {cfg.encoder!r}")
        self.cfg = cfg
        self.words = nn.Embedding(cfg.vocab_size, cfg.glove_dim, padding_idx=0)
        self.dim = cfg.glove_dim
        if cfg.negation_scope:
            # starts as the plain mean; `roles` (word_roles of the vocabulary) is saved with
            # the weights, so a loaded model needs no vocabulary to find scopes
            self.negated = nn.Parameter(torch.ones(cfg.glove_dim))
            self.register_buffer("roles", torch.zeros(cfg.vocab_size))

    def set_vocab(self, vocab: Vocab) -> None:
        """Mark the vocabulary's negation cues and scope ends (with negation_scope)."""
        if self.cfg.negation_scope:
            self.roles.copy_(torch.from_numpy(word_roles(vocab.words)))

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        ids = ids[:, : int(lengths.max())]
        vectors = self.words(ids)  # the padding row is zero
        if self.cfg.negation_scope:
            roles = self.roles[ids]
            vectors = torch.where(in_scope(roles)[..., None], vectors * self.negated, vectors)
            vectors = torch.where((roles == CUE)[..., None], torch.zeros_like(vectors), vectors)
        if ids.shape[1] > LEAD_TOKENS:  # a row past the lead: its tail weighs less (as numpy's)
            position = torch.arange(ids.shape[1], device=ids.device)
            weights = torch.where(position < LEAD_TOKENS, 1.0, TAIL_WEIGHT).to(vectors.dtype)
            weights = weights * (position < lengths[:, None])  # padding weighs nothing
            return (vectors * weights[..., None]).sum(dim=1) / weights.sum(dim=1, keepdim=True)
        summed = vectors.sum(dim=1)
        return summed / lengths[:, None].to(summed.dtype)

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.forward(ids, lengths)

    def set_frozen_vectors(self, matrix: Tensor) -> None:
        """Start the table from pretrained vectors (named as InferSent's, whose table stays
        frozen: here every row trains)."""
        with torch.no_grad():
            self.words.weight.copy_(matrix)
            self.words.weight[0].zero_()


def in_scope(roles: Tensor) -> Tensor:
    """[B, L] roles -> whether each token lies in a negation's scope: after a cue of its row,
    before the next scope end (qtsearch.text.negation.in_scope on concatenated sentences)."""
    cue = (roles == CUE).long()
    cues = cue.cumsum(dim=1)
    before = cues - cue
    closed = torch.where(roles == END, cues, torch.zeros_like(cues))
    return before - closed.cummax(dim=1).values > 0
