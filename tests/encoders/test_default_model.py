"""The shipped default model and the demo: the README's first command ends in real results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qtsearch import load_encoder
from qtsearch.app.demo import CORPUS, ensure_demo_index
from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.files import fingerprint, latest_validation, read_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_demo_index(tmp_path_factory.mktemp("demo") / "index")


def test_shipped_model_is_small_safe_and_records_its_validation() -> None:
    files = {p.name for p in DEFAULT_MODEL.iterdir()}
    # the model folder, its pieces table (an open vocabulary, qtsearch.encoders.pieces) and its
    # card (no pickle, no checkpoint or cache)
    assert files == {"config.json", "vocab.json", "weights.safetensors", "metrics.jsonl",
                     "README.md", "pieces.safetensors"}
    assert sum(p.stat().st_size for p in DEFAULT_MODEL.iterdir()) < 40e6
    val = latest_validation(DEFAULT_MODEL)
    # the model card (default_model/README.md): the last validation (step 10,260, the end of
    # its three epochs) of the multi-task run, every task well above chance (pairs: in-batch
    # retrieval among 512, qa among 256, the batches it trained with)
    assert val["step"] == 10260
    assert val["pairs_val_accuracy"] == pytest.approx(0.5045, abs=1e-4)
    assert val["qa_val_accuracy"] == pytest.approx(0.7467, abs=1e-4)
    for task in ("", "qt_", "pairs_", "qa_", "teacher_"):
        assert val[f"{task}val_accuracy"] > 1.5 * val[f"{task}chance"], task
    config = read_config(DEFAULT_MODEL)
    assert config["encoder"]["encoder"] == "mean" and config["encoder"]["objective"] == "multitask"
    assert config["search"] == {"fit": "centre", "lexical_weight": 0.3}
    # trained on questions of SQuAD's training articles and MedQuAD (qtsearch.text.datasets.qa)
    assert config["train"]["qa_train"] > 80_000
    # trained with negated positives as hard negatives (qtsearch.text.negation)
    assert config["train"]["negations"] and config["train"]["pairs_negations"] > 200_000
    assert config["train"]["pairs_batch_size"] == 512
    assert load_encoder().dim == 256


def test_shipped_model_encodes_identically_after_reload() -> None:
    sentences = ["It rained hard all morning and the roads were wet.", "a dog runs", ""] * 5
    first, again = load_encoder(), load_encoder()
    assert np.array_equal(first.encode(sentences), again.encode(sentences))
    one_by_one = np.stack([first.encode([s])[0] for s in sentences])
    np.testing.assert_allclose(one_by_one, first.encode(sentences), rtol=1e-5, atol=1e-6)


def test_a_fingerprint_is_kept_under_the_files_identity_and_never_outlives_a_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL, model)
    first = fingerprint(model)
    assert len(list((tmp_path / "cache" / "fingerprints").iterdir())) == 1
    assert fingerprint(model) == first == fingerprint(DEFAULT_MODEL)  # kept, and the content's
    weights = model / "weights.safetensors"
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of the last weight, size and modification time put back
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fingerprint(model) != first
    (tmp_path / "file").write_text("")  # a cache that cannot be made: hashed every time
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "file" / "cache"))
    assert fingerprint(DEFAULT_MODEL) == first


def test_a_query_converts_only_its_rows_and_a_build_the_whole_table_once() -> None:
    """The shipped table stays fp16 in memory: a query's rows are converted as gathered, to
    the values a float32 copy of the table holds, and a batch's sparse product converts the
    table once, shared with the open vocabulary and every index's copy of it."""
    from qtsearch.encoders.mean import SPARSE_FROM, MeanEncoder

    enc = MeanEncoder()
    assert enc.rows.dtype == np.float16 and enc.open_vocab is not None
    assert not enc.rows.flags.writeable and not enc.rows.flags.owndata  # the mapped file's
    whole = np.ascontiguousarray(enc.rows, dtype=np.float32)  # what the table was converted to
    known = ["It rained hard all morning.", "a dog runs"]
    ids = [enc.token_ids(s) for s in known]
    # the mean as it was computed on the float32 table: rows summed in order, then divided
    expected = np.stack([np.add.reduce(whole[i], axis=0) / len(i) for i in ids])
    assert np.array_equal(enc.encode(known), expected)
    enc.encode(["keratoconus in the telephone"])  # a composed word: GrowingTable.take
    assert "table" not in enc.__dict__ and enc.open_vocab.table.whole._whole is None
    index_vocab = enc.open_vocab.fresh()
    assert index_vocab.table.base_rows is enc.rows  # shared, not copied
    enc.encode(known * SPARSE_FROM)  # the sparse path needs the table whole
    assert enc.table.dtype == np.float32 and np.array_equal(enc.table, whole)
    assert enc.open_vocab.table.whole() is enc.table is index_vocab.table.whole()


def test_the_pieces_table_is_read_when_a_word_is_first_composed() -> None:
    """A query of known words never reads the pieces table; the first composed word reads it,
    and composes as the table read at once does."""
    from qtsearch.encoders.mean import MeanEncoder
    from qtsearch.encoders.pieces import Pieces

    enc = MeanEncoder()
    assert enc.pieces is not None and enc.pieces.dim == enc.dim
    enc.encode(["It rained hard all morning."])
    assert enc.pieces._table is None
    enc.encode(["keratoconus in the telephone"])  # an unknown word: composed from pieces
    assert enc.pieces._table is not None
    eager = Pieces.load(DEFAULT_MODEL)
    assert eager is not None
    assert np.array_equal(enc.pieces.compose("keratoconus"), eager.compose("keratoconus"))


def test_a_pieces_table_removed_after_the_model_opened_is_one_model_error(tmp_path: Path
                                                                           ) -> None:
    from qtsearch.core.errors import ModelError
    from qtsearch.encoders.files import PIECES
    from qtsearch.encoders.mean import MeanEncoder

    folder = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL, folder)
    enc = MeanEncoder(folder)
    (folder / PIECES).unlink()
    with pytest.raises(ModelError, match="the pieces table is gone"):
        enc.encode(["keratoconus"])


def test_a_table_stored_fp16_with_an_inf_in_its_last_row_is_refused(tmp_path: Path) -> None:
    """Read as stored, the table is still checked whole (block by block) before any use."""
    from safetensors.numpy import load_file, save_file

    from qtsearch.core.errors import ModelError
    from qtsearch.encoders.files import TABLE, read_tensors

    model = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL, model)
    tensors = load_file(str(model / "weights.safetensors"))
    assert tensors[TABLE].dtype == np.float16
    tensors[TABLE][-1, -1] = np.inf
    save_file(tensors, str(model / "weights.safetensors"), {"format": "qtsearch-model"})
    with pytest.raises(ModelError, match="not finite numbers"):
        read_tensors(model, [TABLE], keep_half=(TABLE,))


@pytest.mark.slow
def test_battle_finds_war_and_songs_find_music(demo_index: Path) -> None:
    from qtsearch.search.searcher import Searcher

    with Searcher.open(demo_index, device="cpu") as index:
        assert index.count > 5000
        battle, song = index.search(["The army was defeated in the battle and the soldiers "
                                     "retreated.", "The song reached number one on the charts."],
                                    k=10)
    war = ("army", "armies", "battle", "troops", "soldiers", "forces", "division", "regiment",
           "war", "fighting", "attack", "enemy", "infantry", "brigade", "battalion")
    music = ("song", "single", "album", "chart", "music", "band", "track", "hot 100")
    assert sum(any(w in h.text.lower() for w in war) for h in battle) >= 5, [h.text for h in battle]
    assert sum(any(w in h.text.lower() for w in music) for h in song) >= 5, [h.text for h in song]


@pytest.mark.slow
def test_demo_command_prints_results_and_reuses_its_index(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    cmd = [sys.executable, str(REPO / "cli.py"), "demo", "--out", str(out), "-k", "3"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "search: The army was defeated" in first.stdout and "analogy:" in first.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corpus"][0]["path"].endswith(CORPUS.name)
    built = (out / "index.faiss").stat().st_mtime_ns
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and (out / "index.faiss").stat().st_mtime_ns == built
