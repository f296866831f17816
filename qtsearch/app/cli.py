"""The `qtsearch` command line: parses options, calls the library, prints. Every failure the
user can act on ends as one line on stderr and a documented exit code (see qtsearch.core.errors),
usage errors included; a reader closing the pipe (`qtsearch demo | head -2`) ends it quietly."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from qtsearch.app.commands import MODULES, modules_for, register_all
from qtsearch.core.disk import NO_SPACE, no_space
from qtsearch.core.errors import OutputError, QTSearchError, UsageError


class _Group(TyperGroup):
    """The top-level group: a closed stdout ends the command quietly (exit 0).

    Typer itself turns a broken pipe into a silent exit 1, which reads as a failure; the reader
    that closed the pipe (`head`) got all it asked for, so qtsearch ends as if it had finished.
    """

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _drop_stdout()
            raise typer.Exit(0) from None


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def make_app(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """The `qtsearch` Typer app with the commands of `modules` (all by default)."""
    app = typer.Typer(
        name="qtsearch",
        cls=_Group,
        help="Train Quick-Thoughts sentence encoders, index sentences with FAISS, and search "
             "them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # plain help, as the docs page prints it: Rich markup would take every "[encoders]" of
        # the help texts for a tag and drop it
        rich_markup_mode=None,
    )
    register_all(app, modules)
    app.callback()(_root)
    return app


def __getattr__(name: str) -> Any:
    """`app`, every command registered, made when first asked for (the docs and tests read
    it); a run of one command builds an app with that command's module alone (`_main`)."""
    if name == "app":
        globals()["app"] = made = make_app()
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def version_line() -> str:
    """The package version and what identifies the shipped model's vectors (an index records
    the same fingerprint: `qtsearch info INDEX`)."""
    from qtsearch.core.version import __version__
    from qtsearch.encoders.files import DEFAULT_MODEL, fingerprint, is_model_folder

    model = (f"shipped model {fingerprint(DEFAULT_MODEL)}" if is_model_folder(DEFAULT_MODEL)
             else "no shipped model")
    return f"qtsearch {__version__} ({model})"


def _print_version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print the version and the shipped model's "
                                      "fingerprint, then exit."),
) -> None:
    pass


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("qtsearch: %(levelname)s: %(message)s"))
    log = logging.getLogger("qtsearch")
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if os.environ.get("QTSEARCH_DEBUG") else logging.WARNING)
    log.propagate = False


def usage_message(e: TyperException) -> str:
    """Typer's usage error (Click's, vendored) as one line that says where the help is."""
    message = " ".join(e.format_message().split()).rstrip(".")
    ctx = getattr(e, "ctx", None)
    return message if ctx is None else f"{message} (see '{ctx.command_path} --help')"


def _fail(e: QTSearchError) -> None:
    print(f"qtsearch: error: {e}", file=sys.stderr)
    sys.exit(e.code)


def _launcher_needed(argv: list[str]) -> bool:
    """`train… --nproc N`, or any command inside a torchrun job: the only ones that need the
    process launcher, whose module imports torch (seconds) before anything is parsed."""
    nproc = any(a == "--nproc" or a.startswith("--nproc=") for a in argv)
    return "RANK" in os.environ or (nproc and bool(argv) and argv[0].startswith("train"))


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script and of `python cli.py`."""
    # SIGTERM (kill, a scheduler's stop) ends a command as Ctrl-C does: the same one-line
    # message, the same resume path (a build keeps its finished shards), exit 130; training
    # and the server put their own handlers in place while they run
    previous = None
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _main(argv: list[str] | None = None) -> None:
    _setup_logging()
    argv = sys.argv[1:] if argv is None else argv
    try:
        if _launcher_needed(argv):
            from qtsearch.app.launch import launch, nproc_option
            from qtsearch.training.distributed import env_rank

            if env_rank() != 0:  # a torchrun job: its first process alone prints results
                _drop_stdout()
            nproc, argv = nproc_option(argv)
            if nproc > 1:  # `qtsearch train … --nproc N`: the N processes run this command
                sys.exit(launch(nproc, argv))
        # not standalone: usage errors come here, to be printed as one line
        code = make_app(modules_for(argv))(args=argv, prog_name="qtsearch",
                                           standalone_mode=False)
        sys.stdout.flush()
    except BrokenPipeError:  # the last of the output met a closed pipe: see _Group
        _drop_stdout()
        sys.exit(0)
    except TyperException as e:  # bad options or arguments (Click's UsageError and kin)
        if type(e).__name__ == "NoArgsIsHelpError":  # as Typer tells it (its class is private)
            print(e.format_message())  # `qtsearch` or `qtsearch bench` alone: the help
            sys.exit(2)
        _fail(UsageError(usage_message(e)))
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        print("qtsearch: interrupted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:  # before Typer runs a command
        print("qtsearch: interrupted", file=sys.stderr)
        sys.exit(130)
    except QTSearchError as e:
        _fail(e)
    except OSError as e:
        if os.environ.get("QTSEARCH_DEBUG"):
            raise
        why = NO_SPACE if no_space(e) else e.strerror or e  # a library's own words for it
        _fail(OutputError(f"{e.filename or ''}: {why}".lstrip(": ")))
    except Exception as e:
        if os.environ.get("QTSEARCH_DEBUG"):
            raise
        print(
            f"qtsearch: internal error: {type(e).__name__}: {e} "
            "(run with QTSEARCH_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        sys.exit(1)
    if code == 130:  # Typer's silent exit for a Ctrl-C that no command explained
        print("qtsearch: interrupted", file=sys.stderr)
    sys.exit(code if isinstance(code, int) else 0)  # typer.Exit(code) from a command, or 0


if __name__ == "__main__":
    main()
