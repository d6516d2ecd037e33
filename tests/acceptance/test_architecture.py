"""The layout holds: the core, the ops and the reports load without pytest, the package has
no import circle, and the op registry refuses what it does not declare."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc import ops
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.execution import perf
from pytest_xtc.core.judging import reference
from pytest_xtc.ops.builder import GraphBuilder
from tests import ROOT

PACKAGE = ROOT / "pytest_xtc"
PYTEST_FREE = ("core", "ops", "report")


def modules_of(folder: Path) -> list[str]:
    return sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in folder.rglob("*.py")
    )


def test_core_ops_and_report_load_without_pytest() -> None:
    names = [m for part in PYTEST_FREE for m in modules_of(PACKAGE / part)]
    script = textwrap.dedent(f"""
        import importlib, sys
        class NoPytest:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pytest", "_pytest"):
                    raise ImportError("pytest imported by " + name)
        sys.meta_path.insert(0, NoPytest())
        for name in {names!r}:
            importlib.import_module(name)
        print(len({names!r}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(names) > 20


def imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """Every pytest_xtc module that ``path`` imports, at any level of its code
    (``from package import module`` counts as importing that module alone)."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            found |= subs if len(subs) == len(node.names) else {base, *subs}
    return {name for name in found if name.startswith("pytest_xtc")}


def test_the_package_has_no_import_circle() -> None:
    files = {m: p for p in PACKAGE.rglob("*.py")
             if (m := ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
                 .removesuffix(".__init__"))}
    graph = {m: {i for i in imports(p, m, set(files)) if i in files and i != m}
             for m, p in files.items()}
    # The top-level package only hands names on (lazily); deprecated shims re-export.
    graph["pytest_xtc"] = set()
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt] if nxt in path else [module, nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_imports_only_go_down_the_layers() -> None:
    """The layers of README's Design section, declared in pyproject.toml for import-linter:
    no module imports one of a layer above its own."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--config", str(PACKAGE.parent / "pyproject.toml")],
                          capture_output=True, text=True, timeout=300, check=False,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_an_upward_import_breaks_the_layers_check(tmp_path: Path) -> None:
    """The check can fail: ops importing the report layer is refused."""
    import shutil

    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "pytest_xtc", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PACKAGE.parent / "pyproject.toml", copy / "pyproject.toml")
    relu = copy / "pytest_xtc" / "ops" / "relu.py"
    relu.write_text(relu.read_text() + "\nfrom pytest_xtc.report.rules import verdicts  # noqa\n")
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], capture_output=True, text=True, timeout=300,
                          check=False, cwd=copy, env={"PYTHONPATH": str(copy), "PATH": ""})
    assert done.returncode != 0
    assert "pytest_xtc.ops.relu -> pytest_xtc.report.rules.verdicts" in done.stdout


def node_graph(op: str, attrs: dict, shape: tuple[int, ...] = (3, 4)) -> dict:
    return {"name": "g", "inputs": [{"uid": "%0", "expr": {"type": {
        "shape": list(shape), "dtype": "float32"}}}],
        "nodes": [{"name": "Y", "uid": "%1", "expr": {"op": {"name": op, "attrs": attrs},
                                                       "args": ["%0"]}}],
        "outputs": [{"uid": "%1"}]}


def test_an_unknown_op_is_refused_naming_it() -> None:
    with pytest.raises(graphs.GraphError, match="node 'Y': unknown op 'softmax'"):
        graphs.nodes(node_graph("softmax", {}))


def test_an_undeclared_attribute_is_refused_naming_op_and_attribute() -> None:
    with pytest.raises(graphs.GraphError, match="op relu has no attribute alpha"):
        graphs.nodes(node_graph("relu", {"alpha": 0.1}))
    with pytest.raises(graphs.GraphError, match="op relu, attribute threshold='x'"):
        graphs.nodes(node_graph("relu", {"threshold": "x"}))


def test_relu_threshold_is_computed_not_ignored() -> None:
    x = np.array([[-1.0, 0.25, 0.5, 2.0]] * 3)
    (out,) = reference.forward(node_graph("relu", {"threshold": 0.5}), [x])
    assert out.tolist()[0] == [0.5, 0.5, 0.5, 2.0]


def test_unnamed_nodes_and_nd_matmul_operands_are_evaluated() -> None:
    graph = {"inputs": [{"uid": "%0", "expr": {"type": {"shape": [4, 2, 3], "dtype": "float32"}}},
                        {"uid": "%1", "expr": {"type": {"shape": [6, 5], "dtype": "float32"}}}],
             "nodes": [{"uid": "%2", "expr": {"op": {"name": "matmul", "attrs": {}},
                                              "args": ["%0", "%1"]}}],
             "outputs": [{"uid": "%2"}]}
    a, b = np.ones((4, 2, 3)), np.ones((6, 5))
    ref = reference.evaluate(graph, [a, b])
    assert ref.values[0].shape == (4, 5) and np.all(ref.values[0] == 6)
    assert ref.reductions == {"%2": 6}


NEGATE = '''
import numpy as np
from pytest_xtc.ops.spec import Op

class Negate(Op):
    name = "negate"
    def shape(self, shapes, attrs):
        return tuple(shapes[0])
    def forward(self, args, attrs):
        return np.negative(args[0])

OP = Negate()

def family(*shape, dtype="float32"):
    from pytest_xtc.ops.builder import GraphBuilder
    g = GraphBuilder("negate")
    return g.output(g.node("negate", "Y", [g.tensor("X", shape, dtype)])), "x".join(map(str, shape))
'''


def test_adding_an_op_is_adding_one_module(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "negate.py").write_text(NEGATE)
    monkeypatch.setattr(ops, "__path__", [*ops.__path__, str(tmp_path)])
    monkeypatch.setitem(sys.modules, "pytest_xtc.ops.negate", None)
    del sys.modules["pytest_xtc.ops.negate"]
    ops.modules.cache_clear()
    try:
        from pytest_xtc.conformance import families

        graph, label = families._families()["negate"](2, 3)
        x = np.arange(6.0).reshape(2, 3)
        ref = reference.evaluate(graph, [x])
        assert label == "2x3" and np.array_equal(ref.values[0], -x)
        assert np.all(ref.bounds[0] == 0)  # moves values: bit-exact, by default
        assert perf.flop_count(graph) == 0
        g = GraphBuilder("g")
        assert g.node("negate", "Z", [g.tensor("X", (4,), "float64")]).shape == (4,)
    finally:
        ops.modules.cache_clear()
        sys.modules.pop("pytest_xtc.ops.negate", None)


NEW_HOMES = {"adapter": "adapter", "cases": "cases.case", "xtc_env": "execution.xtc_env"}


@pytest.mark.parametrize("old", ["adapter", "cases", "xtc_env"])
def test_the_01_module_paths_still_work_and_warn(old: str) -> None:
    script = (
        "import warnings; warnings.simplefilter('error')\n"
        f"try:\n    import pytest_xtc.{old}\nexcept DeprecationWarning as w:\n"
        "    print('warned:', w)\n"
        "warnings.simplefilter('ignore')\n"
        f"import pytest_xtc.{old} as shim, pytest_xtc.core.{NEW_HOMES[old]} as new\n"
        "names = getattr(new, '__all__', None) or [n for n in vars(new)\n"
        "    if not n.startswith('_') and not n[0].islower()]\n"
        "assert all(getattr(shim, n) is getattr(new, n) for n in names), names\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"warned: pytest_xtc.{old} is deprecated" in done.stdout


@pytest.mark.parametrize("old", ["xtc_env", "registry", "runner", "reference", "shrink"])
def test_the_03_core_paths_still_work_and_warn(old: str) -> None:
    """core/ split by role in 0.4: the 0.3 paths give the same module and name the new one."""
    from pytest_xtc.core import moved

    new = moved.MOVED[f"pytest_xtc.core.{old}"]
    script = (
        "import warnings; warnings.simplefilter('error')\n"
        f"try:\n    import pytest_xtc.core.{old}\nexcept DeprecationWarning as w:\n"
        "    print('warned:', w)\n"
        "warnings.simplefilter('ignore')\n"
        f"import pytest_xtc.core.{old} as old, {new} as new\n"
        "assert old is new\n"
        "from pytest_xtc.core.cases import Case\n"
        "from pytest_xtc.core.cases.case import Case as moved_case\n"
        "assert Case is moved_case\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"warned: pytest_xtc.core.{old} moved in pytest-xtc 0.4: import {new}" in done.stdout


SPLIT_PATHS = [
    *(("pytest_xtc.core.execution", o) for o in ("isolation", "registry", "xtc_env", "declcache")),
    *(("pytest_xtc.report", o) for o in ("verdicts", "limits", "rerun", "summary", "records")),
]


@pytest.mark.parametrize(("package", "old"), SPLIT_PATHS)
def test_the_paths_before_the_splits_by_role_still_work_and_warn(package: str, old: str) -> None:
    """core/execution/ (into workers/, adapters/, xtc/) and report/ (into files/, parts/,
    rules/, render/) split by role in 0.4: the old path gives the same module, and its
    warning names the new path and the version that removes the old one."""
    from pytest_xtc.core import moved

    new = moved.MOVED[f"{package}.{old}"]
    script = (
        "import warnings; warnings.simplefilter('error')\n"
        f"try:\n    from {package} import {old}\n"
        "except DeprecationWarning as w:\n    print('warned:', w)\n"
        "warnings.simplefilter('ignore')\n"
        f"import {package}.{old} as old, {new} as new\n"
        "assert old is new\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"warned: {package}.{old} moved in pytest-xtc 0.4: import {new}" in done.stdout
    assert f"the old path is removed in {moved.REMOVED_IN}" in done.stdout
    if package == "pytest_xtc.core.execution":
        assert new.split(".")[2] in ("workers", "adapters", "xtc")


def test_the_vendor_api_is_exported_by_the_package() -> None:
    import pytest_xtc
    from pytest_xtc.core import adapter
    from pytest_xtc.core.cases import case as cases
    from pytest_xtc.core.xtc import xtc_env

    for name in pytest_xtc.__all__:
        assert getattr(pytest_xtc, name) is not None, name
    assert pytest_xtc.TargetAdapter is adapter.TargetAdapter
    assert pytest_xtc.Case is cases.Case and pytest_xtc.xtc_env is xtc_env


def test_unit_tests_mirror_the_package() -> None:
    """``tests/unit/<package path>/test_<module>.py`` tests ``pytest_xtc/<package path>/
    <module>`` (a module or a package): a unit test file names what it tests by its place."""
    unit = ROOT / "tests" / "unit"
    strays = []
    for test_file in unit.rglob("test_*.py"):
        relative = test_file.relative_to(unit)
        module = relative.parent / relative.name.removeprefix("test_").removesuffix(".py")
        home = PACKAGE / module
        if not (home.with_suffix(".py").is_file() or (home / "__init__.py").is_file()):
            strays.append(str(relative))
    assert not strays, f"unit tests whose place names no module of the package: {strays}"
    flat = [p.name for p in (ROOT / "tests").glob("test_*.py")]
    assert not flat, f"test files outside unit/ and acceptance/: {flat}"


def test_a_case_identity_is_written_in_one_place() -> None:
    """``<target>-<case id>`` is written by core/cases/identity.py alone: no f-string
    elsewhere joins a target and a case id with a dash."""
    joined = re.compile(r"\{[\w.]*(?:target|name)[\w.]*\}-\{[\w.]*(?:id|case|case_id)\}")
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in PACKAGE.rglob("*.py")
             if path.name != "identity.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if joined.search(line)]
    assert not found, f"a case identity built outside core/cases/identity.py: {found}"


MAX_MODULE_LINES = 350


def too_long(root: Path) -> list[str]:
    """Each module under ``root`` over MAX_MODULE_LINES lines, as ``path (N lines)``."""
    counts = {path: len(path.read_text().splitlines()) for path in sorted(root.rglob("*.py"))}
    return [f"{path.relative_to(root)} ({n} lines)" for path, n in counts.items()
            if n > MAX_MODULE_LINES]


def test_no_module_is_over_350_lines() -> None:
    offenders = too_long(PACKAGE)
    assert not offenders, f"modules over {MAX_MODULE_LINES} lines (split them by role): {offenders}"


def test_the_size_check_names_a_module_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert too_long(tmp_path) == [f"sub/long.py ({MAX_MODULE_LINES + 1} lines)"]
