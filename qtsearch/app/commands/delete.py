"""`qtsearch delete`."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import counted, err, out


def delete_cmd(
    index: Path = typer.Argument(..., help="An index folder made by build-index."),
    doc_id: list[str] | None = typer.Option(
        None, "--doc-id", help="A record's id (the doc_id column: a record's id field, a "
        "Wikipedia article's id): all its passages go. Repeatable."),
    where: list[str] | None = typer.Option(
        None, "--where", "-w", help="Rows whose COLUMN equals VALUE, as `search --where`: "
        "source=notes.txt (file name or full path), doc=N, title=…, any column. Repeatable "
        "(all must hold); with --doc-id, both must hold."),
    wait: bool = typer.Option(
        False, "--wait", help="When another build, add or delete is writing this index, wait "
        "for it (default: exit 7 at once, naming it)."),
) -> None:
    """Delete rows (sentences, passages) from an index: those of the records --doc-id, or
    those matching --where.

    The index is rewritten on a copy that replaces it only when complete; vectors are not
    embedded again. Nothing matched: a note, the index unchanged, exit 0. Every row matched:
    refused (exit 2), an index is never empty."""
    from qtsearch.lifecycle.writers import delete_condition, delete_from_index

    condition = delete_condition(index, where) if where else None
    result = delete_from_index(
        index, doc_id or [], condition, wait=None if wait else 0.0,
        on_note=lambda line: err.print(line, highlight=False, soft_wrap=True))
    if result.note:
        err.print(result.note, highlight=False, soft_wrap=True)
    out.print(f"deleted {counted(result.deleted, 'sentence')} in {result.seconds:,.1f} s → "
              f"{result.path} now holds {result.count:,}")


def register(app: typer.Typer) -> None:
    app.command("delete")(delete_cmd)
