"""`qtsearch check`: verify an index against its manifest."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import out
from qtsearch.core.errors import DamagedIndex


def check(index: Path = typer.Argument(..., help="An index folder made by build-index.")) -> None:
    """Verify an index: every file's sha256 against the one its manifest records, and that
    vectors, rows, the rows the BM25 files cover and the manifest's count agree. Reads every
    byte (seconds per GB); exit 5 with the problems in one line when anything is off, 0 when
    it is whole.
    Files found whole whose modification time changed (a copy that did not keep the times)
    have their times recorded, so that opening the index no longer hashes them."""
    from qtsearch.lifecycle.on_disk import check_folder, counts, damaged

    manifest, problems = check_folder(index)
    if problems:
        raise DamagedIndex(damaged(index, problems))
    files = manifest.files
    got = counts(index)
    what = (f"{len(files)} files match their recorded sha256" if files else
            "no checksums recorded (an index built before they were; `add` or a rebuild "
            "records them)")
    agree = " = ".join(k.replace("_", " ") for k, v in got.items() if v is not None)
    out.print(f"{index}: ok: {what}; {agree} = manifest count = {manifest.count:,}",
              highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("check")(check)
