"""The metadata database's schema: the `sentences` table (one row per vector, its id the
vector's), its indexes, and the full-text table over its texts; written once, here, for the
store that creates and reads it and for the query layer that builds FTS5 queries."""

from __future__ import annotations

#: One row as given to `insert_many`: (id, text, source, line, doc, position, title, url,
#: doc_id, section); the last four are a Wikipedia article's metadata (None for other text).
Row = tuple[int, str, str, int, int, int, str | None, str | None, str | None, str | None]
COLUMNS = ("id", "text", "source", "line", "doc", "position", "title", "url", "doc_id",
           "section")
#: Columns of whole numbers (the others are text).
INTEGER_COLUMNS = ("id", "line", "doc", "position")

CREATE_TABLE = (
    "CREATE TABLE sentences (id INTEGER NOT NULL PRIMARY KEY, text TEXT NOT NULL, "
    "source TEXT NOT NULL, line INTEGER, doc INTEGER, position INTEGER, title TEXT, url TEXT, "
    "doc_id TEXT, section TEXT)")
#: `context` by (doc, position); `--where title=…` and `--where doc_id=…` without a scan
CREATE_INDEXES = tuple(f"CREATE INDEX IF NOT EXISTS ix_sentences_{name} ON sentences ({cols})"
                       for name, cols in (("doc_position", "doc, position"),
                                          ("title", "title"), ("doc_id", "doc_id")))
INSERT = f"INSERT INTO sentences ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
#: The full-text (FTS5, BM25) table over `sentences.text`, keyed by the same ids as the vectors.
FTS_TABLE = "sentences_fts"
#: How FTS5 cuts and stems the texts (and query words: "rained" is searched as "rain").
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"
FTS_CREATE = (f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(text, "
              f"content='sentences', content_rowid='id', tokenize='{FTS_TOKENIZE}')")


def fts_phrase(word: str) -> str:
    """A word as an FTS5 string: quoted, inner quotes doubled, so no character of user text
    is ever read as query syntax (AND, NEAR, *, ^, column filters, parentheses)."""
    return '"' + word.replace('"', '""') + '"'
