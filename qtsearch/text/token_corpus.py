"""A tokenised corpus on disk: the training input, built in one streaming pass.

Each word gets a provisional id as it is first seen while the ids stream to disk; once all words
are counted the vocabulary is chosen and the ids are remapped in place, so the text is read and
tokenised once and never held in memory. Files: ids.bin (int32), offsets.bin (int64, N+1),
docs.bin (int32, N), vocab.json, meta.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import InputError
from qtsearch.text.reader import list_files, read_sentences
from qtsearch.text.tokenizer import tokenize
from qtsearch.text.vocab import PAD, UNK, Vocab

_CHUNK = 1 << 16


def corpus_signature(
    paths: Iterable[str | os.PathLike], split: bool, vocab_size: int, max_len: int
) -> str:
    """Identifies a corpus build: the files' contents, in order, and the options. Not their
    paths or times: data copied afresh (a fresh mount of the data, another machine's folder)
    is the same corpus, and `--resume` must accept it (hashing the files is cheap next to
    tokenising them)."""
    h = hashlib.sha256(json.dumps([split, vocab_size, max_len]).encode())
    for f in list_files(paths):
        with open(f, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()[:16]


class TokenCorpus:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.meta = json.loads((self.folder / "meta.json").read_text())
        n, t = self.meta["sentences"], self.meta["tokens"]
        self.ids = np.memmap(self.folder / "ids.bin", dtype=np.int32, mode="r", shape=(t,))
        self.offsets = np.memmap(
            self.folder / "offsets.bin", dtype=np.int64, mode="r", shape=(n + 1,)
        )
        self.docs = np.memmap(self.folder / "docs.bin", dtype=np.int32, mode="r", shape=(n,))
        self.vocab = Vocab.load(self.folder / "vocab.json")

    def __len__(self) -> int:
        return int(self.meta["sentences"])

    def batch(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sentences [start, stop) as right-padded ids [B, T], lengths [B] and doc ids [B]."""
        offs = np.asarray(self.offsets[start : stop + 1])
        lengths = np.diff(offs)
        out = np.zeros((stop - start, int(lengths.max())), dtype=np.int64)
        flat = np.asarray(self.ids[offs[0] : offs[-1]])
        rel = offs - offs[0]
        for i in range(stop - start):
            out[i, : lengths[i]] = flat[rel[i] : rel[i + 1]]
        return (
            torch.from_numpy(out),
            torch.from_numpy(lengths.astype(np.int64)),
            torch.from_numpy(np.asarray(self.docs[start:stop], dtype=np.int64)),
        )

    @classmethod
    def build(
        cls,
        paths: list[str],
        folder: Path,
        split: bool,
        vocab_size: int,
        max_len: int,
        progress: Callable[[int], None] | None = None,
    ) -> TokenCorpus:
        """Tokenise the corpus into `folder`, reusing it when the same build is already there."""
        folder = Path(folder)
        sig = corpus_signature(paths, split, vocab_size, max_len)
        meta_path = folder / "meta.json"
        if meta_path.is_file() and json.loads(meta_path.read_text()).get("signature") == sig:
            return cls(folder)
        tmp = folder.with_name(folder.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        pid: dict[str, int] = {}
        counts: list[int] = []
        n_sent = n_tok = 0
        id_buf: list[int] = []
        off_buf: list[int] = [0]
        doc_buf: list[int] = []
        with (
            open(tmp / "ids.bin", "wb") as fi,
            open(tmp / "offsets.bin", "wb") as fo,
            open(tmp / "docs.bin", "wb") as fd,
        ):

            def flush() -> None:
                np.asarray(id_buf, dtype=np.int32).tofile(fi)
                np.asarray(off_buf, dtype=np.int64).tofile(fo)
                np.asarray(doc_buf, dtype=np.int32).tofile(fd)
                id_buf.clear()
                off_buf.clear()
                doc_buf.clear()

            for sent in read_sentences(paths, split=split):
                tokens = tokenize(sent.text)
                for i, w in enumerate(tokens):
                    j = pid.get(w)
                    if j is None:
                        j = pid[w] = len(counts)
                        counts.append(0)
                    counts[j] += 1
                    if i < max_len:
                        id_buf.append(j)
                if not tokens:
                    id_buf.append(-1)  # an all-punctuation-free empty sentence becomes <unk>
                n_tok += min(len(tokens), max_len) or 1
                n_sent += 1
                off_buf.append(n_tok)
                doc_buf.append(sent.doc)
                if len(id_buf) >= _CHUNK:
                    flush()
                    if progress:
                        progress(n_sent)
            flush()
        if progress:
            progress(n_sent)
        words = list(pid)
        order = sorted(range(len(words)), key=lambda j: (-counts[j], words[j]))
        order = [j for j in order if words[j] not in (PAD, UNK)][:vocab_size]
        vocab = Vocab([PAD, UNK] + [words[j] for j in order])
        remap = np.ones(len(words) + 1, dtype=np.int32)  # unknown → <unk> (1); index −1 too
        remap[np.asarray(order, dtype=np.int64)] = np.arange(2, len(order) + 2, dtype=np.int32)
        ids = np.memmap(tmp / "ids.bin", dtype=np.int32, mode="r+", shape=(n_tok,))
        for s in range(0, n_tok, 1 << 22):
            ids[s : s + (1 << 22)] = remap[ids[s : s + (1 << 22)]]
        ids.flush()
        del ids
        vocab.save(tmp / "vocab.json")
        write_json_atomic(
            tmp / "meta.json",
            {
                "signature": sig,
                "sentences": n_sent,
                "tokens": n_tok,
                "types": len(words),
                "vocab_size": len(vocab),
                "max_len": max_len,
                "split": split,
            },
        )
        if n_sent == 0:
            raise InputError("the corpus holds no sentences")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
        return cls(folder)
