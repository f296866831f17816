"""Metadata filters: `where={"source": "emma.txt", "doc": 3}` as one SQL condition.

Column names are checked against the store's own columns (so a filter can never inject SQL,
and any column an index has, e.g. a Wikipedia article's `title`, `doc_id`, `url` or `section`,
can be filtered on); values are bound.
Several columns are AND-ed. `source` matches the stored path or its file name, since a user
remembers `emma.txt`, not the absolute path the build recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qtsearch.core.errors import UsageError
from qtsearch.index.schema import INTEGER_COLUMNS


@dataclass(frozen=True)
class Filter:
    """An SQL condition on the `sentences` table and its bound values."""

    clause: str
    params: tuple[Any, ...]
    text: str  # as the user wrote it, for messages

    def __bool__(self) -> bool:
        return bool(self.clause)


NO_FILTER = Filter("", (), "")
#: The whole numbers SQLite binds (64 bits); a larger one would fail inside the query.
SQLITE_MIN, SQLITE_MAX = -(2**63), 2**63 - 1


def make_filter(where: Mapping[str, str | int] | None, columns: list[str]) -> Filter:
    """The condition for `where` (column -> value; several are AND-ed); UsageError for an
    unknown column or a non-number given for a numeric one."""
    if not where:
        return NO_FILTER
    parts: list[str] = []
    params: list[Any] = []
    for name, value in where.items():
        if name not in columns or name == "text":
            usable = ", ".join(c for c in columns if c != "text")
            raise UsageError(f"cannot filter on {name!r}: the columns are {usable}")
        if name in INTEGER_COLUMNS:
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise UsageError(f"filter {name}={value!r}: {name} is a whole number") from None
        if isinstance(value, int) and not SQLITE_MIN <= value <= SQLITE_MAX:
            raise UsageError(f"filter {name}={value}: out of range (SQLite's whole numbers go "
                             f"from {SQLITE_MIN:,} to {SQLITE_MAX:,})")
        if name == "source":
            parts.append("(sentences.source = ? OR sentences.source LIKE ? ESCAPE '\\')")
            escaped = str(value).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += [str(value), f"%/{escaped}"]
        else:
            parts.append(f'sentences."{name}" = ?')
            params.append(value)
    text = " and ".join(f"{n}={v}" for n, v in where.items())
    return Filter(" AND ".join(parts), tuple(params), text)


def parse_where(items: list[str] | None) -> dict[str, str]:
    """`--where col=value` options (repeatable) as a dict; UsageError for a malformed one."""
    where: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--where {item!r}: expected COLUMN=VALUE, e.g. source=emma.txt")
        where[name.strip()] = value.strip()
    return where
