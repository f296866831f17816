"""The package metadata a wheel carries: an SPDX licence with its texts, the typing marker,
the README as the long description (the install itself is checked by .ci/run)."""

from __future__ import annotations

from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]


def test_the_metadata_names_a_spdx_licence_whose_texts_exist() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"  # an SPDX expression, not the deprecated table
    assert project["license-files"] and all((REPO / f).is_file()
                                            for f in project["license-files"])
    assert "MIT License" in (REPO / "LICENSE").read_text(encoding="utf-8")
    assert project["readme"] == "README.md"
    assert "Typing :: Typed" in project["classifiers"]
    assert (REPO / "qtsearch" / "py.typed").is_file()
