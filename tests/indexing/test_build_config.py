"""qtsearch.indexing.build_config: the options of one build, their defaults, how they read the
corpus, where an index goes by default, and bad options refused through `Index.build` before
any work."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import qtsearch
from qtsearch.core.errors import UsageError
from qtsearch.index.names import INDEX_TYPES
from qtsearch.indexing.build_config import IndexConfig, default_out
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.records import PASSAGE_WORDS, RecordFields


def test_the_defaults() -> None:
    config = IndexConfig(corpus=["emma.txt"])
    assert (config.model, config.out, config.index, config.fit) == (None, None, "auto", "auto")
    assert (config.split_sentences, config.parquet, config.overwrite) == (False, False, False)
    assert (config.device, config.precision, config.input_format, config.docs) == (
        "auto", "auto", "auto", "file")
    assert (config.shard_size, config.batch_size, config.passage_words) == (
        50_000, 512, PASSAGE_WORDS)
    assert qtsearch.IndexConfig is IndexConfig


def test_read_options_are_what_the_reader_takes() -> None:
    config = IndexConfig(corpus=["r.jsonl"], split_sentences=True, input_format="records",
                         docs="paragraph", passage_words=50, id_field="key", text_field="body")
    assert config.read_options() == ReadOptions(
        split=True, fmt="records", docs="paragraph", passage_words=50,
        fields=RecordFields("key", None, "body"))
    # the defaults read as the reader does by default
    assert IndexConfig(corpus=["emma.txt"]).read_options() == ReadOptions()


def test_the_saved_form_round_trips() -> None:
    config = IndexConfig(corpus=["a.txt", "b.txt"], index="hnsw", fit="whiten:64")
    assert IndexConfig(**dataclasses.asdict(config)) == config


@pytest.mark.parametrize(("corpus", "out"), [
    (["data/emma.txt.gz"], "indexes/emma"),
    (["/x/notes.text", "other.txt"], "indexes/notes"),
    (["wiki/AA"], "indexes/AA"),
    (["notes.text.gz"], "indexes/notes"),
    ([".txt"], "indexes/corpus"),
])
def test_default_out_is_named_after_the_first_corpus(corpus: list[str], out: str) -> None:
    assert default_out(corpus) == Path(out)


def test_an_unknown_index_type_names_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        qtsearch.Index.build(["One text."], tmp_path / "idx", index="annoy")
    assert str(e.value) == f"--index must be auto or one of {', '.join(INDEX_TYPES)}, not 'annoy'"
    assert "flat, sq8, ivf, ivf-pq, hnsw" in str(e.value)
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize(("option", "message"), [
    ({"shard_size": 0}, "--shard-size and --batch-size must be at least 1"),
    ({"batch_size": -1}, "--shard-size and --batch-size must be at least 1"),
    ({"input_format": "xml"}, "--format must be one of auto, text, wikiextractor, records, "
                              "not 'xml'"),
    ({"docs": "chapter"}, "--docs must be one of file, paragraph, not 'chapter'"),
])
def test_bad_options_are_refused_before_any_work(tmp_path: Path, option: dict,
                                                 message: str) -> None:
    with pytest.raises(UsageError) as e:
        qtsearch.Index.build(["One text."], tmp_path / "idx", **option)
    assert str(e.value) == message
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()


def test_the_resume_key_of_the_same_options_is_as_before() -> None:
    """An interrupted build resumes after an upgrade: the key its shards were spooled under
    (these values as the key was computed before `ReadOptions`) comes out the same."""
    from types import SimpleNamespace

    from qtsearch.indexing.pipeline import Builder

    encoder = SimpleNamespace(fingerprint="abc123", device=SimpleNamespace(type="cpu"))
    corpus = [{"path": "/x/a.jsonl", "sha256": "f" * 64}]
    records = IndexConfig(corpus=["a"], split_sentences=True, input_format="records",
                          docs="paragraph", passage_words=50, id_field="key", text_field="body")
    keys = [Builder._resume_key(SimpleNamespace(config=c), corpus, encoder)  # type: ignore
            for c in (IndexConfig(corpus=["a"]), records)]
    assert keys == ["df5d4d44a6b9f0c1", "c16994dd0ef12906"]
