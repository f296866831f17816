"""What a client may send the HTTP API: the JSON bodies of `POST /search`, `/analogy`, `/add`
and `/delete`, validated by pydantic before a route runs (their field descriptions are the
API page's), and refused in one line where their text is not Unicode text; and the query
string of `GET /search`."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from starlette.datastructures import QueryParams

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


#: What the search options mean, for the API page (POST /search's body, GET /search's query).
_SAYS = {
    "k": "Results per query.",
    "mode": "hybrid | semantic | lexical (default: the index's own).",
    "ids": "q holds ids of stored sentences: their neighbours.",
    "by": "passage | doc: one hit per document, ranked by its best passage, with its other "
          "`passages`.",
    "rerank": "Re-rank the first hits with the server's re-ranker (`serve --rerank`).",
    "explain": "Give each hit an `explain` object, as `qtsearch search --json --explain`.",
}


class SearchBody(Body):
    q: str | int | list[str | int] = Field(
        description="A query sentence or a list of them (with ids: sentence ids).")
    k: int = Field(TOP_K, description=_SAYS["k"])
    mode: str | None = Field(None, description=_SAYS["mode"])
    where: dict[str, str | int] | list[str] | None = Field(
        None, description='Filters, all of which must hold: {"source": "emma.txt"} or '
                          '["source=emma.txt", "doc=3"].')
    ids: bool = Field(False, description=_SAYS["ids"])
    by: str = Field("passage", description=_SAYS["by"])
    rerank: bool = Field(False, description=_SAYS["rerank"])
    explain: bool = Field(False, description=_SAYS["explain"])


#: The GET /search parameters given once per value.
REPEATED = ("q", "where")


class SearchQuery(BaseModel):
    """The query string of GET /search, read whole (`read`) rather than parameter by parameter
    by FastAPI, whose handling of eight parameters cost each request ~50 µs more than this
    (docs/serving.md, "The HTTP side"); the API page lists them all the same
    (`parameters`)."""

    q: list[str] = Field(description="Query sentence; repeat for several.")
    k: int = Field(TOP_K, description=_SAYS["k"])
    mode: str | None = Field(None, description=_SAYS["mode"])
    where: list[str] = Field([], description="COLUMN=VALUE; repeatable.")
    ids: bool = Field(False, description=_SAYS["ids"])
    rerank: bool = Field(False, description=_SAYS["rerank"])
    by: str = Field("passage", description=_SAYS["by"])
    explain: bool = Field(False, description=_SAYS["explain"])

    @classmethod
    def read(cls, params: QueryParams) -> SearchQuery:
        """The parameters of a query string (q and where each as often as given, any other
        its last value; unknown ones ignored), refused as FastAPI refuses a parameter (400,
        its first error: "k: Input should be a valid integer, …")."""
        given = {name: params.getlist(name) if name in REPEATED else params[name]
                 for name in cls.model_fields if name in params}
        try:
            return cls.model_validate(given)
        except ValidationError as e:
            raise RequestValidationError(e.errors(include_url=False)) from None

    @classmethod
    def parameters(cls) -> list[dict[str, Any]]:
        """The query parameters as the OpenAPI page describes them."""
        schema = cls.model_json_schema()
        return [{"name": name, "in": "query", "required": name in schema.get("required", ()),
                 "description": prop.get("description", ""),
                 "schema": {k: v for k, v in prop.items() if k != "description"}}
                for name, prop in schema["properties"].items()]


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
