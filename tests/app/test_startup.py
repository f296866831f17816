"""Start-up: the CLI parses before it imports the heavy libraries (torch alone takes seconds),
and every command still runs once it has parsed. Speed itself is measured by
benchmarks/startup.py, not asserted here."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

#: Libraries `qtsearch --help` (and the import of the CLI) must not load.
HEAVY = ("torch", "faiss", "pyarrow", "numba", "numpy")

#: Runs qtsearch.app.cli.main on each argv of argv[1] (JSON) in this process, then prints which of
#: HEAVY were imported.
PROBE = """
import json, sys
from qtsearch.app.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)),
      file=sys.stderr)
"""


def heavy_imports(argvs: list[list[str]], watched: tuple[str, ...] = HEAVY) -> list[str]:
    """The `watched` modules (the HEAVY libraries) loaded by running these command lines in one
    fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs), json.dumps(watched)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_importing_the_cli_loads_none_of_the_heavy_libraries() -> None:
    code = (f"import sys, qtsearch, qtsearch.app.cli; loaded = [m for m in {HEAVY!r} "
            "if m in sys.modules]; assert loaded == [], loaded")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_help_of_every_command_loads_none_of_the_heavy_libraries() -> None:
    """`--version` too: it hashes the shipped model's files, nothing more."""
    from typer.main import get_command

    from qtsearch.app.cli import app

    group = get_command(app)
    names = sorted(group.commands)  # type: ignore[attr-defined]
    assert {"search", "build-index", "train", "eval", "serve"} <= set(names)
    argvs = [["--help"], ["--version"], *([name, "--help"] for name in names)]
    argvs += [["bench", "analogy", "--help"], ["bench", "relevance", "--help"]]
    assert heavy_imports(argvs) == []


def test_a_usage_error_loads_none_of_the_heavy_libraries() -> None:
    assert heavy_imports([["search"], ["build-index", "--index"], ["nope"]]) == []


def test_the_fit_default_of_build_index_is_the_library_default() -> None:
    """commands/index.py writes "auto" out so as not to import numpy for it."""
    from typer.main import get_command

    from qtsearch.app.cli import app
    from qtsearch.index.choose import DEFAULT_FIT

    build = get_command(app).commands["build-index"]  # type: ignore[attr-defined]
    assert next(p.default for p in build.params if p.name == "fit") == DEFAULT_FIT


def qtsearch(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed entry point's code path (`python -m qtsearch`), in a fresh process."""
    return subprocess.run([sys.executable, "-m", "qtsearch", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def emma_index(tmp_path_factory: pytest.TempPathFactory, emma_lines: Path) -> Path:
    """900 sentences of Emma indexed with the shipped model (a mean of words), by the CLI."""
    index = tmp_path_factory.mktemp("startup") / "emma"
    built = qtsearch("build-index", emma_lines, "-o", index, "-q", cwd=index.parent)
    assert built.returncode == 0, built.stderr
    assert "index of 900 sentences" in built.stdout
    return index


def test_a_one_shot_search_with_the_mean_model_never_imports_torch(emma_index: Path) -> None:
    """The shipped model is encoded in numpy on the CPU (qtsearch.encoders.mean): torch (~2.4 s)
    and the compiled GRU paths (numba, ~0.5 s) stay out of a one-shot search."""
    argv = ["search", str(emma_index), "She was very happy to see her old friend again.",
            "--json"]
    loaded = heavy_imports([argv])
    assert "torch" not in loaded and "numba" not in loaded and "pyarrow" not in loaded
    assert {"faiss", "numpy"} <= set(loaded)  # the probe sees what a search does load


def test_a_one_shot_search_loads_neither_a_process_pool_nor_masked_arrays(
        emma_index: Path) -> None:
    """multiprocessing (a build's worker processes), numpy.ma (which np.unique imports to ask
    whether its input is masked) and the safetensors library (the model's files are mapped,
    not read by it) serve a query nothing and cost its start; the query's made-up word is
    composed from word pieces, which reads the pieces table."""
    watched = ("multiprocessing", "concurrent.futures.process", "numpy.ma", "safetensors",
               "qtsearch.encoders.pieces")
    argv = ["search", str(emma_index), "Mr. Knightley spoke of the zorblaxian frigate.",
            "--json"]
    assert heavy_imports([argv], watched) == ["qtsearch.encoders.pieces"]


def test_a_cpu_build_with_the_mean_model_never_imports_torch(emma_lines: Path,
                                                            tmp_path: Path) -> None:
    """Embedding runs in numpy, and the index stage asks for a GPU without torch where the
    machine has no NVIDIA device file: torch's import (~1.5 s) was a third of a 20k-sentence
    build. On a machine with one, torch is asked, as it must be."""
    from qtsearch.core.device import NVIDIA_DEVICE_FILES

    argv = ["build-index", str(emma_lines), "-o", str(tmp_path / "emma"), "-q"]
    loaded = heavy_imports([argv])
    assert (tmp_path / "emma" / "manifest.json").is_file()
    gpu_machine = any(Path(f).exists() for f in NVIDIA_DEVICE_FILES)
    assert ("torch" in loaded) == gpu_machine, loaded


def test_numpy_vectors_of_the_mean_model_are_torchs(emma_lines: Path, tmp_path: Path) -> None:
    """Same vectors within 1e-6 and the same fingerprint: an index built with either encoder
    opens with the other. (The shipped model without its pieces table: with one, words
    outside the table are composed in numpy alone, and torch's Encoder refuses the folder.)"""
    from qtsearch.core.errors import ModelError
    from qtsearch.encoders.base import DEFAULT_MODEL
    from qtsearch.encoders.files import PIECES
    from qtsearch.encoders.mean import SPARSE_FROM, MeanEncoder
    from qtsearch.encoders.neural import Encoder
    from qtsearch.encoders.registry import load_encoder

    with pytest.raises(ModelError, match="pieces table"):
        Encoder(None, device="cpu")
    closed = tmp_path / "closed"
    shutil.copytree(DEFAULT_MODEL, closed, ignore=shutil.ignore_patterns(PIECES))
    sentences = emma_lines.read_text(encoding="utf-8").splitlines()
    sentences += ["", "Mr. Knightley!!", "zzyzx qwerty"]  # empty, short, unknown words
    numpy_side = load_encoder(closed, device="cpu")
    assert isinstance(numpy_side, MeanEncoder)
    torch_side = Encoder(closed, device="cpu", precision="fp32")
    assert numpy_side.fingerprint == torch_side.fingerprint
    assert numpy_side.dim == torch_side.dim and numpy_side.info() == torch_side.info()
    # a query's few sentences (gather) and a build's many (one sparse product)
    assert len(sentences[-20:]) < SPARSE_FROM <= len(sentences)
    for few, normalize in itertools.product((False, True), (False, True)):
        part = sentences[-20:] if few else sentences
        ours = numpy_side.encode(part, batch_size=100, normalize=normalize)
        theirs = torch_side.encode(part, batch_size=100, normalize=normalize)
        assert ours.dtype == np.float32
        assert ours.shape == theirs.shape == (len(part), numpy_side.dim)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    assert np.abs(ours).sum() > 0


@pytest.mark.slow
def test_the_lazy_commands_still_build_search_and_train(tmp_path: Path, emma_lines: Path,
                                                        emma_index: Path) -> None:
    """One process per command, as a user runs them: each imports what it needs itself."""
    index = emma_index
    found = qtsearch("search", index, "Emma was very happy.", "-k", "3", "--json", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)[0]["hits"]
    assert len(hits) == 3 and all(h["source"].endswith("emma.txt") for h in hits)

    about = qtsearch("info", index, "--json", cwd=tmp_path)
    assert about.returncode == 0 and json.loads(about.stdout)["count"] == 900

    model = tmp_path / "model"  # the training commands build their config after parsing
    trained = qtsearch("train", emma_lines, "-o", model, "--max-steps", "2", "--hidden", "16",
                       "--word-dim", "8", "--vocab-size", "300", "--batch-size", "20",
                       "--val-every", "2", "--device", "cpu", "-q", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert json.loads((model / "config.json").read_text())["encoder"]["hidden"] == 16


def _bytes_read() -> int:
    """Bytes this process has read through read() calls (memory-mapped pages not counted)."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


def test_opening_an_index_gives_its_corpus_words_rows_only_when_a_text_needs_them(
        emma_index: Path) -> None:
    """An open reads the manifest and the small files; the corpus-word rows stay in their
    mapped file until a query holds the word (the model is read before, as `serve` holds it)."""
    from qtsearch.encoders.corpus_words import load_corpus_words
    from qtsearch.encoders.registry import load_encoder
    from qtsearch.search.searcher import Searcher

    found = load_corpus_words(emma_index)
    assert found is not None and found[0], "Emma's names are outside the model's words"
    words, rows = found
    n = next(i for i, w in enumerate(words) if w.isalpha())
    shared = load_encoder(None)
    before = _bytes_read()
    with Searcher.open(emma_index, model=shared) as index:
        assert _bytes_read() - before < 1 << 20
        vocab = index.encoder.open_vocab
        assert vocab.composed == {} and len(vocab.table) == vocab.table.base
        np.testing.assert_allclose(index.encoder.encode([words[n]])[0], rows[n], rtol=1e-6)
        assert len(vocab.table) == vocab.table.base + 1  # that word's row, no other


def test_an_index_with_corpus_words_in_the_earlier_layout_answers_the_same(
        emma_index: Path, tmp_path: Path) -> None:
    """Files written before the sorted layout list the words as JSON in the header, in the
    order the build met them: such an index opens and answers as it did."""
    from cli_helpers import as_built
    from safetensors.numpy import save_file

    from qtsearch.encoders.corpus_words import CORPUS_WORDS, FORMAT, load_corpus_words

    old = tmp_path / "old"
    shutil.copytree(emma_index, old)
    words, rows = load_corpus_words(emma_index) or ([], np.zeros(0))
    path = old / CORPUS_WORDS
    save_file({"rows": rows[::-1].astype(np.float16)}, str(path),
              {"format": FORMAT, "beta": "4.0", "words": json.dumps(words[::-1])})
    as_built(old)  # the record its build would have made
    queries = ["She was very happy to see her old friend again.", "Mr. Knightley and Harriet",
               "Hartfield Randalls Highbury"]
    answers = [json.loads(qtsearch("search", index, *queries, "--json", "--mode", mode,
                                   cwd=tmp_path).stdout)
               for index in (emma_index, old) for mode in ("hybrid", "semantic")]
    assert answers[:2] == answers[2:] and all(a["hits"] for a in answers[0])


def test_a_damaged_corpus_words_file_is_one_line(emma_index: Path, tmp_path: Path) -> None:
    from qtsearch.encoders.corpus_words import CORPUS_WORDS
    from qtsearch.index.integrity import FILES

    damaged = tmp_path / "damaged"
    shutil.copytree(emma_index, damaged)
    path = damaged / CORPUS_WORDS
    data = bytearray(path.read_bytes())
    data[8:40] = b"x" * 32  # the header is no longer JSON; the size is the recorded one
    st = path.stat()
    path.write_bytes(bytes(data))
    # its time kept, as a disk's rot keeps it: the open's hash of rewritten files passes it by,
    # and the reader's own check of the header is what answers
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert CORPUS_WORDS in json.loads((damaged / "manifest.json").read_text())[FILES]
    done = qtsearch("search", damaged, "Mr. Knightley", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "not a valid corpus-words file" in done.stderr and "rebuild the index" in done.stderr


#: A generous bound on a one-shot search's peak memory over a small index: the shipped model's
#: tables and the libraries a search imports, with room to spare; every row of the model's
#: table copied once more per open, or every corpus-word row read at open, is what it guards.
#: The table stays fp16 until a batch needs it whole (a query converts its rows alone): ~131 MB
#: measured over Emma's index, against ~167 MB with the float32 copy, hence 224, not 256.
ONE_SHOT_PEAK_MB = 224


#: Runs qtsearch.app.cli.main on argv[1:], then prints the process's peak RSS in kB (VmHWM: the
#: memory since exec; getrusage's maxrss also counts the forking parent's, here pytest's).
PEAK = """
import atexit, sys
def peak():
    with open("/proc/self/status") as fh:
        print(next(line.split()[1] for line in fh if line.startswith("VmHWM:")), file=sys.stderr)
atexit.register(peak)
from qtsearch.app.cli import main
main(sys.argv[1:])
"""


def test_a_one_shot_search_stays_under_a_memory_bound(emma_index: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PEAK, "search", str(emma_index),
                           "She was very happy to see her old friend again.", "-k", "10"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stderr.split()[-1]) / 1024 < ONE_SHOT_PEAK_MB
