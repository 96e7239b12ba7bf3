"""The shape of the package, checked on its source: the stages import one way, functions and modules stay
small, product code has no assert, every exception lives in errors.py and every external tool runs
through proc.py."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "hpcbench"
# The stages of the flow, upstream first. A module may import its own stage and the ones before it.
# Top-level modules that are not a stage sit where their imports put them.
ORDER = (
    ("errors", "files", "collectives", "vocab", "stats", "proc", "findings", "tabular", "records"),
    ("plan",),
    ("rundir", "jobs", "states"),
    ("workloads",),
    ("submit",),
    ("hunt",),
    ("parse",),
    ("figures",),
    ("explain",),
    ("report",),
    ("ops",),
    ("api", "cli", "sweep", "__main__", "__init__"),
)
LEVEL = {name: n for n, names in enumerate(ORDER) for name in names}
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(f, ast.parse(f.read_text(), str(f))) for f in sorted(PACKAGE.rglob("*.py"))]


def _stage(path_or_module: str) -> str:
    """hpcbench/plan/spec.py or hpcbench.plan.spec -> 'plan'; hpcbench/cli.py -> 'cli'."""
    parts = path_or_module.replace("/", ".").removesuffix(".py").split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, hpcbench module) for every import of hpcbench, lazy ones inside functions included."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hpcbench"):
            if node.module == "hpcbench":  # `from hpcbench import x`: x is a module, or a name of the package itself
                names = [f"hpcbench.{a.name}" if _is_module(a.name) else "hpcbench" for a in node.names]
            else:
                names = [node.module]
            out += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("hpcbench")]
    return out


def test_every_stage_is_placed():
    stages = {_stage(str(f.relative_to(REPO))) for f, _ in _modules()}
    assert stages <= set(LEVEL), f"place these in ORDER: {sorted(stages - set(LEVEL))}"


def test_stages_import_only_upstream():
    wrong = []
    for f, tree in _modules():
        mine = _stage(str(f.relative_to(REPO)))
        for line, target in _imports(tree):
            theirs = _stage(target)
            if theirs != "__init__" and LEVEL[theirs] > LEVEL[mine]:
                wrong.append(f"{f.relative_to(REPO)}:{line} ({mine}) imports {target} ({theirs})")
    assert not wrong, "downstream imports:\n" + "\n".join(wrong)


def test_no_two_packages_import_each_other():
    edges = set()
    for f, tree in _modules():
        mine = _stage(str(f.relative_to(REPO)))
        edges |= {(mine, _stage(t)) for _, t in _imports(tree) if _stage(t) != mine}
    cycles = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert not cycles, cycles


def test_report_never_asks_the_scheduler():
    """A summary reads the disk: report/ imports nothing of submit/ (live states come from `status`)."""
    found = [f"{f.relative_to(REPO)}:{line} imports {target}" for f, tree in _modules()
             if _stage(str(f.relative_to(REPO))) == "report"
             for line, target in _imports(tree) if _stage(target) == "submit"]
    assert not found, found


def test_no_backend_is_known_by_name_outside_the_registry():
    """What a backend can do is asked of its flags; only submit/registry.py deals in backend names."""
    from hpcbench.submit.registry import names

    assert {"auto", "sbatch", "submitit", "local"} <= set(names())
    registered = set(names()) - {"auto"}  # also the name of a baseline mode (figures/baseline.py)
    found = []
    for f, tree in _modules():
        if f.relative_to(PACKAGE).as_posix() == "submit/registry.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):  # x == "local", x != "sbatch", x in ("local", ...)
                operands = [node.left, *node.comparators]
                words = [n for o in operands for n in ([o] if isinstance(o, ast.Constant) else getattr(o, "elts", []))
                         if isinstance(n, ast.Constant) and n.value in registered]
                found += [f"{f.relative_to(REPO)}:{w.lineno} compares with {w.value!r}" for w in words]
    assert not found, found


def test_functions_and_modules_are_small():
    long_functions, long_modules = [], []
    for f, tree in _modules():
        lines = len(f.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            long_modules.append(f"{f.relative_to(REPO)}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{f.relative_to(REPO)}:{node.lineno} {node.name}: {n} lines")
    assert not long_functions and not long_modules, long_functions + long_modules


def test_no_assert_in_product_code():
    found = [f"{f.relative_to(REPO)}:{n.lineno}" for f, tree in _modules() for n in ast.walk(tree)
             if isinstance(n, ast.Assert)]
    assert not found, found


def test_every_exception_class_is_in_errors_py():
    def is_exception(node: ast.ClassDef) -> bool:
        return any(isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception", "Fault", "Unavailable"))
                   or isinstance(b, ast.Attribute) and b.attr.endswith(("Error", "Exception")) for b in node.bases)

    found = [f"{f.relative_to(REPO)}:{n.lineno} {n.name}" for f, tree in _modules() if f.name != "errors.py"
             for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and is_exception(n)]
    assert not found, found


@pytest.mark.parametrize("call", ["run", "check_output", "check_call", "call", "getoutput"])
def test_external_tools_run_through_proc(call):
    """proc.run is the one wrapper; the local backend's Popen (ranks that run on) is not a tool call."""
    found = []
    for f, tree in _modules():
        if f.name == "proc.py":
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr == call and isinstance(n.value, ast.Name) and \
                    n.value.id == "subprocess":
                found.append(f"{f.relative_to(REPO)}:{n.lineno} subprocess.{call}")
    assert not found, found


def _package_imports() -> dict[str, set[str]]:
    """package (or top-level module) -> the others it imports, lazy imports included."""
    graph: dict[str, set[str]] = {}
    for f, tree in _modules():
        mine = _stage(str(f.relative_to(REPO)))
        graph.setdefault(mine, set()).update(_stage(t) for _, t in _imports(tree) if _stage(t) not in (mine, "__init__"))
    return graph


def test_no_import_cycle_through_other_packages():
    """No package imports one that imports it back through others (modules of one stage level may import
    each other, so the stage order alone does not rule a cycle out)."""
    graph = _package_imports()
    cycles = []
    for start in sorted(graph):
        seen, todo = set(), list(graph[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += graph.get(n, ())
        if start in seen:
            cycles.append(start)
    assert not cycles, f"packages on an import cycle: {cycles}"


# Where explain's inputs may come from: upstream stages that read no log (parse reads them, and explain asks it).
EXPLAIN_MAY_IMPORT = {*ORDER[0], "plan", "parse", "figures"}


def test_explain_reads_no_log_itself():
    """explain imports neither report nor code that reads logs outside parse, and opens no file but its own
    table of link peaks."""
    assert _package_imports()["explain"] <= EXPLAIN_MAY_IMPORT, _package_imports()["explain"] - EXPLAIN_MAY_IMPORT
    opened = []
    for f, tree in _modules():
        if _stage(str(f.relative_to(REPO))) != "explain":
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and (isinstance(n.func, ast.Name) and n.func.id == "open" or isinstance(
                    n.func, ast.Attribute) and n.func.attr in ("open", "read_text", "read_bytes", "read")):
                opened.append(f"{f.relative_to(REPO)}:{n.lineno}")
    assert len(opened) == 1 and opened[0].startswith("hpcbench/explain/links.py:"), opened  # links.toml
