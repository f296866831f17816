"""The typed manifest (qtsearch.index.manifest.Manifest) on a real index built, added to and
deleted from with the shipped model: it gives back the very dict it read, its attributes
have the manifest's values and types, and a key an older index lacks reads as the readers
have always taken it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from qtsearch.index.manifest import REQUIRED, SHAPE, Manifest, ModelRef
from qtsearch.index.store import MetadataStore
from qtsearch.indexing.append import add_to_index, split_option
from qtsearch.indexing.delete import delete_from_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.records import PASSAGE_WORDS, RecordFields


def _records(path: Path, lines: list[str], first: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{first + i}", "text": line}) + "\n"
                            for i, line in enumerate(lines)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, emma_lines: Path) -> dict[str, dict]:
    """The manifest as written after each writer: build, add, delete (one small index of
    Emma's sentences as records)."""
    folder = tmp_path_factory.mktemp("typed")
    lines = [line.strip() for line in itertools.islice(emma_lines.open(encoding="utf-8"), 42)]
    out = folder / "index"
    build_index(IndexConfig(corpus=[str(_records(folder / "a.jsonl", lines[:40], 0))],
                            out=str(out), device="cpu"))
    written = {"build": json.loads((out / "manifest.json").read_text())}
    add_to_index(out, [str(_records(folder / "b.jsonl", lines[40:], 40))], device="cpu")
    written["add"] = json.loads((out / "manifest.json").read_text())
    delete_from_index(out, ["r3"])
    written["delete"] = json.loads((out / "manifest.json").read_text())
    return {"path": out, **written}


@pytest.mark.parametrize("writer", ["build", "add", "delete"])
def test_a_written_manifest_comes_back_unchanged(index, writer):
    raw = index[writer]
    assert Manifest.from_dict(raw).to_dict() == raw
    assert "created" in raw and "qtsearch_version" in raw  # keys the class does not type


def test_read_gives_the_folders_manifest(index):
    m = Manifest.read(index["path"])
    assert m == Manifest.from_dict(index["delete"])
    assert m.to_dict() == index["delete"]


def test_attributes_are_the_manifests_values(index):
    m = Manifest.read(index["path"])
    with MetadataStore.open(index["path"] / "meta.sqlite") as store:
        assert m.count == store.count() == 41
    assert (m.format, m.version, m.index_type, m.metric) == ("qtsearch-index", 1, "flat",
                                                             "cosine")
    assert isinstance(m.model, ModelRef) and m.model.fingerprint and m.model.name
    assert m.model.dim == m.model_dim and isinstance(m.dim, int) and m.dim > 0
    assert m.fit == m.transform["spec"] != "none"
    assert {"index.faiss", "meta.sqlite"} <= set(m.files)
    assert len(m.corpus) == 2 and m.added[0]["count"] == 2 and m.deleted[0]["count"] == 1
    assert m.split_sentences is False and m.fts is False and m.docs == "file"
    assert m.passage_words == PASSAGE_WORDS and m.record_fields == (None, None, None)
    assert m.input_format == "auto" and set(m.stages) >= {"read", "embed", "index"}
    assert m.build["shard_size"] > 0 and m.index_params == {}


def test_a_writer_changing_to_dict_changes_no_manifest(index):
    m = Manifest.from_dict(index["build"])
    d = m.to_dict()
    d["count"], d["created"] = -1, "now"
    assert m.count == index["build"]["count"] and m.to_dict() == index["build"]


def test_missing_optional_keys_read_as_the_readers_took_them(index):
    """An index from before a key existed: each default is what the readers' `.get` gave."""
    raw = {k: v for k, v in index["build"].items() if k in REQUIRED}
    raw["model"] = {}
    m = Manifest.from_dict(raw)
    assert m.to_dict() == raw
    assert m.model == ModelRef(path=None, fingerprint=None, name=None, dim=None)
    assert (m.model_dim, m.files, m.corpus, m.added, m.deleted) == (None, {}, [], [], [])
    assert (m.split_sentences, m.fts, m.docs, m.passage_words) == (False, None, "file",
                                                                   PASSAGE_WORDS)
    assert (m.transform, m.fit, m.build, m.stages, m.input_format) == (None, "none", {}, {},
                                                                       None)
    assert m.read_options() == ReadOptions(False, "auto", "file", PASSAGE_WORDS,
                                           RecordFields(None, None, None))
    assert m.read_options(True) == ReadOptions(split=True)
    assert split_option(m, None)[0] is False
    # written but empty: as missing, where the readers used `or`
    m = Manifest.from_dict({**raw, "record_fields": [], "transform": {}})
    assert m.record_fields == (None, None, None) and m.fit == "none"
    assert m.passage_words == PASSAGE_WORDS
    assert Manifest.from_dict({**raw, "passage_words": 0}).passage_words == 0


def test_every_key_the_shape_checks_is_typed():
    assert set(SHAPE) <= {f for f in Manifest.__dataclass_fields__}


@pytest.mark.parametrize("edit", [
    lambda m: m.pop("count"),
    lambda m: m.update(count="41"),
    lambda m: m.update(model="default"),
    lambda m: m.update(corpus="emma.txt"),
])
def test_from_dict_refuses_what_is_not_a_manifest(index, edit):
    raw = json.loads(json.dumps(index["build"]))
    edit(raw)
    with pytest.raises(ValueError, match="not a manifest"):
        Manifest.from_dict(raw)
