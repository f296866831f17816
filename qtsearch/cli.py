"""The `qtsearch` command line: parses options, calls the library, prints. Every failure the
user can act on ends as one line on stderr and a documented exit code (see qtsearch.errors)."""

from __future__ import annotations

import logging
import os
import sys

import typer

from qtsearch.commands import register_all
from qtsearch.errors import OutputError, QTSearchError

app = typer.Typer(
    name="qtsearch",
    help="Train Quick-Thoughts sentence encoders, index sentences with FAISS, and search them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
register_all(app)


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("qtsearch: %(levelname)s: %(message)s"))
    log = logging.getLogger("qtsearch")
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if os.environ.get("QTSEARCH_DEBUG") else logging.WARNING)
    log.propagate = False


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script and of `python cli.py`."""
    _setup_logging()
    try:
        # standalone mode: Typer prints usage errors (exit 2) and --help itself
        app(args=argv, prog_name="qtsearch")
    except SystemExit as e:
        if e.code == 130:  # Typer's silent exit for a Ctrl-C that no command explained
            print("qtsearch: interrupted", file=sys.stderr)
        raise
    except KeyboardInterrupt:  # before Typer runs a command
        print("qtsearch: interrupted", file=sys.stderr)
        sys.exit(130)
    except QTSearchError as e:
        print(f"qtsearch: error: {e}", file=sys.stderr)
        sys.exit(e.code)
    except OSError as e:
        if os.environ.get("QTSEARCH_DEBUG"):
            raise
        err = OutputError(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
        print(f"qtsearch: error: {err}", file=sys.stderr)
        sys.exit(err.code)
    except Exception as e:
        if os.environ.get("QTSEARCH_DEBUG"):
            raise
        print(
            f"qtsearch: internal error: {type(e).__name__}: {e} "
            "(run with QTSEARCH_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
