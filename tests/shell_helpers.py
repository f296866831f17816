"""Driving the interactive shell from tests, as a person at a terminal would (pexpect)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pexpect

PROMPT = "qtsearch> "
#: Generous: the first start imports torch and faiss on a busy 2-core machine.
START_TIMEOUT = 90


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(index: Path, history: Path, *extra: str) -> pexpect.spawn:
    env = {**os.environ, "QTSEARCH_HISTORY": str(history), "OMP_NUM_THREADS": "1",
           "TERM": "dumb", "COLUMNS": "160"}  # dumb: plain text without colour codes
    # a user's terminal never starts programs with SIGINT ignored, whatever runs this test
    child = pexpect.spawn(str(Path(sys.executable).with_name("qtsearch")),
                          ["shell", str(index), *extra], env=env, encoding="utf-8",
                          timeout=30, dimensions=(50, 160), preexec_fn=_default_sigint)
    child.expect_exact(f"loading {index}…", timeout=START_TIMEOUT)  # shown before the wait
    child.expect("ready: ", timeout=START_TIMEOUT)
    child.expect_exact(PROMPT)
    return child


def leave(child: pexpect.spawn) -> None:
    """Ctrl-D, as a person leaves: the shell ends with exit status 0."""
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def ask(child: pexpect.spawn, line: str) -> str:
    """Type a line, return everything printed before the next prompt."""
    child.sendline(line)
    child.expect_exact(PROMPT)
    return child.before
