"""A short hash of sentences in order: the cache key of vectors whose row i is sentence i
(the analogy pool's, the teacher's)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def sentences_digest(sentences: Iterable[str]) -> str:
    """16 hex digits of the SHA-256 of the sentences, each ended by a newline."""
    h = hashlib.sha256()
    for s in sentences:
        h.update(s.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]
