"""`qtsearch serve`: a JSON API and a search page over one index, safe under concurrent clients.

`served` holds the open index that every request thread shares and swaps it whole when the
folder changes on disk (an `add`); `app` is the FastAPI application (routes, limits, errors);
`static/` the page at `/` (plain HTML, CSS and JS: no CDN, it works offline). FastAPI and
uvicorn come with the optional extra `[serve]`; nothing here imports them at package import.
"""

from __future__ import annotations

import importlib.util

from qtsearch.core.errors import UsageError

#: The modules of the `[serve]` extra (fastapi_offline: the API docs page without a CDN).
EXTRA_MODULES = ("fastapi", "uvicorn", "fastapi_offline")


def require_extra() -> None:
    """One clear line when the `[serve]` extra is not installed."""
    missing = [m for m in EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"qtsearch serve needs the [serve] extra ({', '.join(missing)} "
                         "missing): pip install 'qtsearch[serve]'")
