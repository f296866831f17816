"""Where qtsearch finds files: its own package data, and the data folder it does not ship.

Every module that reads outside the package goes through `data_root`, so an installed wheel
works from any directory once `$QTSEARCH_DATA` (or `--data`) names the data folder; a checkout
also finds `../shared/data` beside it without either.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from qtsearch.core.errors import InputError

#: The environment variable naming the data folder (transfer/, sts/, yelp/, analogy/, …).
DATA_ENV = "QTSEARCH_DATA"
#: The installed package: models, the demo corpus and the analogy tuples ship inside it.
PACKAGE = Path(__file__).resolve().parents[1]
#: A checkout's data folder, `<checkout>/../shared/data`; None for an installed package.
CHECKOUT_DATA = (PACKAGE.parent.parent / "shared" / "data"
                 if (PACKAGE.parent / "pyproject.toml").is_file() else None)


def data_root(explicit: str | os.PathLike | None = None, need: str | None = None) -> Path:
    """The data folder: `explicit` (--data), else $QTSEARCH_DATA, else ../shared/data beside a
    checkout. With `need` (a subfolder such as "yelp"), that subfolder is returned and must exist.
    """
    raw = explicit or os.environ.get(DATA_ENV)
    root = Path(raw).expanduser() if raw else CHECKOUT_DATA
    if root is None or not root.is_dir():
        where = f"{root}: data folder not found" if root else "no data folder given"
        raise InputError(f"{where} (pass --data DIR or set {DATA_ENV} to the folder holding "
                         "transfer/, sts/, yelp/ and analogy/)")
    if need is None:
        return root
    sub = root / need
    if not sub.is_dir():
        raise InputError(f"{sub}: not found: the data folder {root} has no {need}/")
    return sub


def cache_dir(*parts: str) -> Path:
    """A folder under the qtsearch cache (`$QTSEARCH_CACHE`, default ~/.cache/qtsearch)."""
    root = Path(os.environ.get("QTSEARCH_CACHE") or Path.home() / ".cache" / "qtsearch")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def code_key(folders: tuple[str, ...]) -> str:
    """Hash of the qtsearch version and the source of the package's `folders` (rooms): what a
    cache of computed vectors or indexes keys on besides the model's fingerprint, which names
    the weights but not the code that reads text with them."""
    from qtsearch.core.version import __version__

    h = hashlib.sha256(__version__.encode())
    for folder in folders:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            h.update(str(path.relative_to(PACKAGE)).encode() + path.read_bytes())
    return h.hexdigest()[:12]
