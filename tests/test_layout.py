"""The layout the *Layout* section of docs/architecture.md describes, checked on the source:
every room is in it, rooms follow the data flow, no module imports itself back through others,
only app/ parses argv or draws, commands stay apart, faiss stays behind the index seam,
modules stay small, the tests mirror the rooms, and the benchmarks and the bench runners reach
the engine through the facade."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from qtsearch.core.paths import PACKAGE

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
TESTS = PACKAGE.parent / "tests"

#: Rooms in data-flow order (text → … → queries, then what uses them); a room may import only
#: rooms before it. `core` is what every room uses.
ORDER = ["core", "text", "encoders", "training", "index", "indexing", "search", "lifecycle",
         "evaluation", "app"]
#: Command modules every command may import: shared output and options, not commands.
SHARED_COMMAND_MODULES = {"common", "train_options"}
#: Only the app draws or parses argv.
APP_ONLY = ("rich", "typer", "click")


def _modules() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))]


def _room(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(text: str) -> Iterator[str]:
    """Every module an import statement names, at the top or inside a function alike."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def _graph() -> dict[str, set[str]]:
    """Module → the qtsearch modules it imports (a package's name where no module matches)."""
    modules = {_name(p): text for p, text in _modules()}
    graph = {}
    for name, text in modules.items():
        targets = set()
        for target in _imports(text):
            while target.startswith("qtsearch") and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith("qtsearch") and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def test_rooms_import_only_rooms_before_them() -> None:
    for path, text in _modules():
        room = _room(path)
        if room in ("__init__", "__main__"):
            continue  # the package's own facade re-exports; `python -m qtsearch` runs the app
        assert room in ORDER, f"{path}: a new room: add it to ORDER and to docs/architecture.md"
        for target in _imports(text):
            if target.startswith("qtsearch.") and (other := target.split(".")[1]) != room:
                assert ORDER.index(other) < ORDER.index(room), f"{path} imports {target}"


def test_no_import_cycle() -> None:
    """Counting imports inside functions and under TYPE_CHECKING: a cycle there is one a
    refactoring turns into an import error."""
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycle = [*path[path.index(target):], target]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_only_the_app_draws_or_parses_argv() -> None:
    for path, text in _modules():
        if _room(path) in ("app", "__main__"):
            continue
        for target in _imports(text):
            assert target.split(".")[0] not in APP_ONLY, f"{path} imports {target}"


def test_no_command_imports_another() -> None:
    for path, text in _modules():
        if path.parent.name != "commands":
            continue
        for target in _imports(text):
            if target.startswith("qtsearch.app.commands."):
                assert target.split(".")[3] in SHARED_COMMAND_MODULES, f"{path} imports {target}"


def test_faiss_only_behind_the_index_seam() -> None:
    for path, text in _modules():
        if _room(path) != "index":
            assert not any(t.split(".")[0] == "faiss" for t in _imports(text)), path


ENGINE_ROOMS = ("qtsearch.index", "qtsearch.indexing", "qtsearch.search")
#: What app/ may import from index/, indexing/ and search/ other than through lifecycle/ (the
#: facade and its modules), each a seam with a reason of its own.
FACADE_SEAMS = {
    # k and the re-ranking depth, numpy-free: the CLI's options show them in every --help
    # without importing the engine, which lifecycle/ would
    "qtsearch.search.defaults",
}


def _engine_imports(text: str, seams: set[str],
                    values: dict[str, set[str]] | None = None) -> Iterator[str]:
    """Each engine module an import in `text` names (`from M import x` counts as M, or as M.x
    where x is a module), leaving out the `seams` and the modules imported only for the names
    `values` allows them for."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [(node.module, a.name) for a in node.names]
        else:
            continue
        for module, name in names:
            if name and (module in ENGINE_ROOMS or f"{module}.{name}" in ENGINE_ROOMS):
                module = f"{module}.{name}"  # `from qtsearch.index import bm25`, `… import index`
            if not module.startswith(ENGINE_ROOMS) or module in seams:
                continue
            if name not in (values or {}).get(module, ()):
                yield module


def test_the_app_reaches_the_engine_through_the_facade() -> None:
    """app/ is a user of the library like any other: it goes through `qtsearch.lifecycle`, so
    the facade is the one API the CLI, shell and server share with Python users."""
    # the check itself catches each way of naming the engine, and lets the seams through
    assert list(_engine_imports("from qtsearch.search.searcher import Searcher\n"
                                "import qtsearch.index.store\nfrom qtsearch import indexing\n"
                                "def f():\n    from qtsearch.search import hits\n",
                                FACADE_SEAMS)) == [
        "qtsearch.search.searcher", "qtsearch.index.store", "qtsearch.indexing",
        "qtsearch.search.hits"]
    assert not list(_engine_imports("from qtsearch.search.defaults import TOP_K\n"
                                    "from qtsearch import Index\n", FACADE_SEAMS))
    offenders = [f"{path.relative_to(PACKAGE)}: {target}" for path, text in _modules()
                 if _room(path) == "app" for target in _engine_imports(text, FACADE_SEAMS)]
    assert not offenders, offenders


def test_no_module_over_400_lines() -> None:
    for path, text in _modules():
        assert len(text.splitlines()) <= 400, path


#: Module names too generic to say what they hold once two folders use them: at most one
#: module of each name in the package (`index/store.py` is the index's metadata store, and the
#: evaluation's vectors on disk are `evaluation/vector_cache.py`). A module of app/commands/ is
#: named after its CLI command (`adapt.py` is `qtsearch adapt`) and is not counted.
UNIQUE_MODULE_NAMES = ("engine.py", "store.py", "searcher.py", "harness.py", "vector_cache.py",
                       "tasks_base.py", "pairs.py", "runner.py", "report.py", "nli.py",
                       "infersent.py", "adapt.py", "registry.py", "answers.py", "config.py",
                       "files.py", "folder.py", "limits.py", "metrics.py", "progress.py",
                       "teacher.py")
COMMANDS = PACKAGE / "app" / "commands"


def test_generic_module_names_are_unique() -> None:
    for name in UNIQUE_MODULE_NAMES:
        found = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob(name)
                       if p.parent != COMMANDS)
        assert len(found) <= 1, f"{name} names {len(found)} modules: {found}"


def test_no_class_name_ends_with_an_underscore() -> None:
    """A trailing underscore (dodging a builtin's name) says nothing of what the class is:
    name it for that instead."""
    offenders = [f"{path}:{node.lineno} {node.name}" for path, text in _modules()
                 for node in ast.walk(ast.parse(text))
                 if isinstance(node, ast.ClassDef) and node.name.endswith("_")]
    assert not offenders, offenders


def _assigned_attributes(tree: ast.AST) -> Iterator[tuple[ast.Attribute, int]]:
    """Every attribute an assignment, augmented or annotated, or a setattr call with a literal
    name sets, with its line."""
    def targets(node: ast.AST) -> Iterator[ast.AST]:
        if isinstance(node, ast.Tuple | ast.List):
            for elt in node.elts:
                yield from targets(elt)
        elif isinstance(node, ast.Starred):
            yield from targets(node.value)
        else:
            yield node

    for node in ast.walk(tree):
        found: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            found = [t for target in node.targets for t in targets(target)]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            found = [node.target]
        elif (isinstance(node, ast.Call) and len(node.args) >= 2
              and (getattr(node.func, "id", None) == "setattr"
                   or getattr(node.func, "attr", None) == "setattr")
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            found = [ast.Attribute(node.args[0], node.args[1].value, ast.Store())]
        for target in found:
            if isinstance(target, ast.Attribute):
                yield target, node.lineno


def test_search_settings_are_never_assigned_on_an_opened_index() -> None:
    """An opened index is shared between threads: a search takes other settings as an
    argument (`settings=`), so nothing outside the search room's own classes sets them."""
    names = {"fusion", "lexical_weight", "feedback", "settings"}
    roots = [PACKAGE, PACKAGE.parent / "benchmarks", TESTS]
    offenders = []
    for path in sorted(p for root in roots for p in root.rglob("*.py")):
        own_room = path.is_relative_to(PACKAGE / "search")
        for target, line in _assigned_attributes(ast.parse(path.read_text(encoding="utf-8"))):
            by_self = isinstance(target.value, ast.Name) and target.value.id == "self"
            if target.attr in names and not (own_room and by_self):
                offenders.append(f"{path}:{line} sets .{target.attr}")
    assert not offenders, offenders


#: Settings with one owner: each is assigned at module level in exactly one module, and every
#: other module imports it from there.
OWNED_CONSTANTS = ("BETA", "PASSAGE_WORDS", "INDEX_TYPES", "LEXICAL_WEIGHT",
                   "PASSAGE_LEXICAL_WEIGHT", "FEEDBACK", "FEEDBACK_HITS", "CANDIDATES", "FUSIONS",
                   "DEFAULT_FUSION", "K1", "B", "TOP_K", "RERANK_DEPTH", "ROW_TOKENS",
                   "LEAD_TOKENS", "TAIL_WEIGHT")


def test_each_owned_constant_is_defined_once() -> None:
    owners: dict[str, list[str]] = {name: [] for name in OWNED_CONSTANTS}
    for path, text in _modules():
        for node in ast.parse(text).body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                for name in names:
                    if isinstance(name, ast.Name) and name.id in owners:
                        owners[name.id].append(str(path.relative_to(PACKAGE)))
    for name, where in owners.items():
        assert len(where) == 1, f"{name} is defined in {where or 'no module'}: one owner"


def test_the_architecture_page_lists_every_room() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):text.index("## Development")]
    listed = set(re.findall(r"^  (\w+/|\w+\.\w+) ", section, re.M))
    rooms = {p.name + ("/" if p.is_dir() else "") for p in PACKAGE.iterdir()
             if p.name != "__pycache__"}
    assert listed == rooms


def test_the_tests_mirror_the_rooms() -> None:
    """tests/<room>/ holds the tests of a room; only checks of the whole project stay at the
    top (layout, docs, README)."""
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= set(ORDER), folders - set(ORDER)
    top = {p.name for p in TESTS.glob("test_*.py")}
    assert top == {"test_layout.py", "test_docs.py", "test_readme.py"}, top


def test_the_package_shows_only_its_api() -> None:
    """`import qtsearch` offers the API and nothing else (no `Any`, no `importlib`): every name
    of `__all__` resolves, and `dir()` lists exactly them."""
    import qtsearch

    assert dir(qtsearch) == sorted(qtsearch.__all__)
    for name in qtsearch.__all__:
        assert getattr(qtsearch, name) is not None, name
    assert not {"Any", "importlib", "annotations", "Encoder"} & set(dir(qtsearch))


#: Where benchmarks/ and the evaluation runners may reach into the engine besides
#: `qtsearch` and `qtsearch.lifecycle`: the app's seams, and the vector-backend seam (index
#: types, GPU search).
GENERAL_SEAMS = FACADE_SEAMS | {"qtsearch.index.backend"}
#: Module → the names it may be imported for, not the whole module.
VALUE_SEAMS = {"qtsearch.search.fusion": {"SearchSettings"}}
#: Benchmarks whose subject is one engine component: that component and what measures it.
BENCHMARK_SEAMS = {
    # the BM25 files written from a store in this process and by worker processes
    "benchmarks/bm25_build.py": {"qtsearch.index.bm25"},
    # cached indexes' BM25 weights recomputed with other k1 and b, their manifests written anew
    "benchmarks/bm25_params.py": {"qtsearch.index.bm25", "qtsearch.index.manifest"},
    # the fitted transform's recall, through the builder's own index stage
    "benchmarks/fit_transform.py": {"qtsearch.index.transform", "qtsearch.index.faiss_backend",
                                    "qtsearch.index.recall", "qtsearch.indexing.index_stage"},
    # faiss's threads and its BLAS threshold for a few queries, as the engine sets them
    "benchmarks/faiss_threads.py": {"qtsearch.index.faiss_backend"},
    # the GPU flat backend's batched search against the GPU's limits, recall against faiss-cpu
    "benchmarks/gpu_search.py": {"qtsearch.index.gpu", "qtsearch.index.recall"},
    # faiss index types the builder could choose, built and tuned as it builds them
    "benchmarks/index_candidates.py": {"qtsearch.index.choose", "qtsearch.index.faiss_backend",
                                       "qtsearch.index.recall"},
    # BM25 implementations side by side, over the metadata store's texts
    "benchmarks/lexical_engines.py": {"qtsearch.index.bm25", "qtsearch.index.store",
                                      "qtsearch.search.lexical"},
    # hybrid search with its lexical leg in a thread and inline (the searcher's threshold)
    "benchmarks/lexical_beside.py": {"qtsearch.search.searcher"},
    # the lexical leg alone, as hybrid search runs it
    "benchmarks/lexical_latency.py": {"qtsearch.index.store", "qtsearch.search.lexical"},
    # recall of each index type against exact search; the types derived from one flat index
    "benchmarks/query_latency.py": {"qtsearch.index.recall", "qtsearch.indexing.derive"},
    # the re-ranker's fused score at several weights over one encoding of each query's hits
    "benchmarks/rerank_weight.py": {"qtsearch.search.fusion"},
    # the builder's tokenising in threads and processes
    "benchmarks/tokenise.py": {"qtsearch.indexing.tokens"},
}


def test_benchmarks_and_runners_reach_the_engine_through_the_facade() -> None:
    """What a benchmark or a runner measures is what a user runs: `qtsearch.Index`, not the
    engine's parts, which a refactoring of the engine may change under it."""
    root, evaluation = PACKAGE.parent, PACKAGE / "evaluation"
    files = [*(root / "benchmarks").glob("*.py"), *(evaluation / "retrieval").glob("*.py"),
             *(evaluation / "relevance").rglob("*.py")]
    found = {str(p.relative_to(root)): set(_engine_imports(p.read_text(encoding="utf-8"),
                                                           GENERAL_SEAMS, VALUE_SEAMS))
             for p in sorted(files)}
    offenders = [f"{name} imports {module}" for name, modules in found.items()
                 for module in sorted(modules - BENCHMARK_SEAMS.get(name, set()))]
    assert not offenders, "\n".join(offenders)
    stale = {name: sorted(allowed - found.get(name, set()))
             for name, allowed in BENCHMARK_SEAMS.items() if allowed - found.get(name, set())}
    assert not stale, f"BENCHMARK_SEAMS allows what is no longer imported: {stale}"
