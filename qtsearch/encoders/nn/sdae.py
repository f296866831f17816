"""Sequential denoising autoencoder (SDAE, Hill, Cho and Korhonen 2016).

A GRU encoder (uni or bi, as for QT) reads a noised sentence; a GRU decoder whose initial state
is the encoder's final state reconstructs the clean sentence word by word (teacher forcing: it
reads a learned start vector and then the clean words, through the encoder's embedding table).
The loss is the token cross-entropy over real tokens only; padding is never a target. The
sentence vector is the encoder's final state on the clean sentence, so encoding needs only the
encoder; the decoder is saved with it so that --resume continues.

Noise N(S | p0, px) as in the paper: each word is deleted with probability p0, then each of the
non-overlapping bigrams (w1 w2)(w3 w4)… is swapped with probability px. A sentence whose words
would all be deleted keeps one of them, chosen at random.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.objective import BatchStats, ObjectiveOptions, word_prediction_stats
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig, GRUEncoder, init_gru


def add_noise(
    ids: Tensor, lengths: Tensor, rng: np.random.Generator, p_drop: float, p_swap: float
) -> tuple[Tensor, Tensor]:
    """Noised copies of right-padded sentences [B, T] → (ids [B, T'], lengths [B]), T' ≤ T."""
    rows = []
    for row, n in zip(ids.cpu().numpy(), lengths.tolist()):
        words = row[:n]
        keep = rng.random(n) >= p_drop
        if not keep.any():
            keep[rng.integers(n)] = True
        words = words[keep]
        pairs = words[: len(words) // 2 * 2].reshape(-1, 2)  # a view: swapped in place
        swap = rng.random(len(pairs)) < p_swap
        pairs[swap] = pairs[swap, ::-1]
        rows.append(words)
    new_lengths = np.array([len(w) for w in rows])
    out = np.zeros((len(rows), new_lengths.max()), dtype=np.int64)
    for i, w in enumerate(rows):
        out[i, : len(w)] = w
    return torch.from_numpy(out).to(ids.device), torch.from_numpy(new_lengths).to(ids.device)


class SDAE(nn.Module):
    metric = "reconstruction token accuracy"
    baseline = "the most frequent word"

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        if cfg.encoder not in ("uni", "bi"):
            raise ValueError(f"the SDAE encoder is a GRU (uni or bi), not {cfg.encoder!r}")
        self.cfg = cfg
        self.encoder = GRUEncoder(cfg)
        self.dim = self.encoder.out_dim
        self.start = nn.Parameter(torch.empty(cfg.word_dim).uniform_(-0.1, 0.1))
        self.decoder = nn.GRU(cfg.word_dim, self.dim, batch_first=True)
        init_gru(self.decoder)
        self.out = nn.Linear(self.dim, cfg.vocab_size)

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.encoder(ids, lengths)

    def objective(
        self, ids: Tensor, lengths: Tensor, docs: Tensor, opts: ObjectiveOptions,
        rng: np.random.Generator,
    ) -> BatchStats:
        noisy, noisy_lengths = add_noise(ids, lengths, rng, opts.word_dropout, opts.swap_prob)
        return self.reconstruction(self.encoder(noisy, noisy_lengths), ids, lengths)

    def reconstruction(self, state: Tensor, ids: Tensor, lengths: Tensor) -> BatchStats:
        """Teacher-forced decoding of `ids` from encoder states [B, dim]; loss over real tokens."""
        ids = ids[:, : int(lengths.max())]
        words = self.encoder.embed(ids[:, :-1])
        start = self.start.to(words.dtype).expand(len(ids), 1, -1)
        hidden, _ = self.decoder(torch.cat([start, words], dim=1), state[None].to(words.dtype))
        real = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        with torch.autocast(ids.device.type, enabled=False):  # the softmax over V in fp32
            logp = torch.log_softmax(self.out(hidden[real].float()), dim=1)
        return word_prediction_stats(
            logp, torch.arange(len(logp), device=logp.device), ids[real], 1
        )
