"""A module's lazily exported names: imported on first read, an unknown name refused as Python
refuses it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qtsearch.core.lazy_names import lazy_names


def test_a_name_is_imported_when_first_read() -> None:
    getattr_ = lazy_names("somewhere", {"OrderedDict": "collections"})
    from collections import OrderedDict

    assert getattr_("OrderedDict") is OrderedDict
    with pytest.raises(AttributeError, match="module 'somewhere' has no attribute 'nope'"):
        getattr_("nope")


def test_importing_the_package_loads_none_of_the_engine() -> None:
    code = ("import sys, qtsearch, qtsearch.lifecycle\n"
            "print(sorted(m for m in sys.modules if m.startswith(('qtsearch.search', "
            "'qtsearch.index', 'numpy', 'faiss'))))\n"
            "qtsearch.Results\n"
            "print('qtsearch.search.hits' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "True"]
