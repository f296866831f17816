"""The Python facade: everything a script needs to embed sentences and query an index.

    from qtsearch.api import Index, load_encoder
    with Index.open("indexes/books") as index:
        hits = index.search("It rained all day.", k=5)
"""

from qtsearch.encode.encoder import Encoder, load_encoder
from qtsearch.query.rerank import Reranker
from qtsearch.query.search import Hit, Index, Record

__all__ = ["Encoder", "Hit", "Index", "Record", "Reranker", "load_encoder"]
