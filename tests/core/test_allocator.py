"""The training allocator setting: glibc takes it; elsewhere nothing changes."""

from __future__ import annotations

import platform
import sys

from qtsearch.core.allocator import keep_freed_memory


def test_glibc_takes_the_setting() -> None:
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() == glibc
