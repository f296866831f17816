"""The names of an index folder's files and of its index types: what every module of the
folder agrees on, apart from the manifest's code so that any of them can import it."""

MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
META_FILE = "meta.sqlite"
CONFIG_FILE = "config.json"
PARQUET_FILE = "meta.parquet"
INDEX_TYPES = ("flat", "sq8", "ivf", "ivf-pq", "hnsw")
