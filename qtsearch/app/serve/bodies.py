"""What a client may send the HTTP API: the JSON bodies of `POST /search`, `/analogy`, `/add`
and `/delete`, validated by pydantic before a route runs (their field descriptions are the
API page's), and refused in one line where their text is not Unicode text."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator
from pydantic_core import PydanticCustomError

from qtsearch.search.defaults import TOP_K
from qtsearch.text.tokenizer import SURROGATE


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where in a JSON value a string holds a lone surrogate (JSON's \\ud800 escapes decode to
    one: no UTF-8 encodes it, so neither SQLite nor the tokenizers take it); None if none."""
    if isinstance(value, str):
        return None if value.isascii() or not SURROGATE.search(value) else where or "body"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        here = f"{where}.{key}" if where else str(key)
        found = lone_surrogate(key, here) or lone_surrogate(item, here)
        if found:
            return found
    return None


class Body(BaseModel):
    """A request body: its text must be Unicode text, refused in one line where it is not."""

    @model_validator(mode="before")
    @classmethod
    def _unicode(cls, data: Any) -> Any:
        where = lone_surrogate(data)
        if where:
            raise PydanticCustomError("surrogate", "{where}: a lone surrogate (an unpaired "
                                      "\\ud800-\\udfff escape) is not text",
                                      {"where": where})
        return data


class SearchBody(Body):
    q: str | int | list[str | int] = Field(
        description="A query sentence or a list of them (with ids: sentence ids).")
    k: int = Field(TOP_K, description="Results per query.")
    mode: str | None = Field(None, description="hybrid | semantic | lexical (default: the "
                                               "index's own).")
    where: dict[str, str | int] | list[str] | None = Field(
        None, description='Filters, all of which must hold: {"source": "emma.txt"} or '
                          '["source=emma.txt", "doc=3"].')
    ids: bool = Field(False, description="q holds ids of stored sentences: their neighbours.")
    by: str = Field("passage", description="passage | doc: one hit per document, ranked by "
                                           "its best passage, with its other `passages`.")
    rerank: bool = Field(False, description="Re-rank the first hits with the server's "
                                            "re-ranker (`serve --rerank`).")
    explain: bool = Field(False, description="Give each hit an `explain` object, as "
                                             "`qtsearch search --json --explain`.")


class AnalogyBody(Body):
    a: str
    b: str
    c: str
    k: int = TOP_K
    keep_inputs: bool = Field(False, description="Allow A, B and C among the results.")


class AddBody(Body):
    text: str = Field(description="The new text as a file would hold it: one sentence a line, "
                                  "a blank line between documents (or running text, as the "
                                  "index was built or as split_sentences says).")
    source: str = Field("posted.txt", description="File name recorded as the source.")
    split_sentences: bool | None = None
    format: str = Field("auto", description="auto | text | wikiextractor, as `qtsearch add "
                                            "--format`.")
    allow_duplicates: bool = Field(False, description="Add the text even when the index "
                                                      "already holds the same text (sha256).")
    upsert: bool = Field(False, description="A record whose id the index holds replaces its "
                                            "old passages (`qtsearch add --upsert`).")


class DeleteBody(Body):
    doc_ids: list[str] = Field([], description="Records whose rows go (the doc_id column).")
    where: dict[str, str | int] | list[str] | str | None = Field(
        None, description='Rows matching these filters go: {"source": "notes.txt"}, '
                          '["source=notes.txt", "doc=3"] or "source=notes.txt". With doc_ids, '
                          "both must hold.")
