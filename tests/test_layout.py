"""The shape of the code base: short functions, short files, layered imports with no cycles.

Layers, lowest first, follow the request's journey (api -> service -> engine -> answering -> backends ->
prompting -> request -> the foundation modules); a module may import its own layer and those below, never
one above, and the core (everything below `api`) never imports a web framework.

In `evals/`, the shared harness (`evals.harness`) imports no suite package (every other package under
`evals/`) and a suite imports no other suite; the entry scripts at the top register the suites.
Neither `src/` nor `evals/` has an import cycle.

The limits flag a file or function that does two jobs; they are not targets. `engine.py` stays under
300 lines (the journey read top to bottom), and at most two files of `src/` sit within 10 lines of the
file limit. A `fmt: skip` comment keeps a statement as written only where a table reads better aligned: rows
of expected values or payloads side by side (a test's cases, an SGLang request body, a probe's
settings), columns a reader compares down; a call or a literal merely packed under the line limit is
formatted. Their count in `src/` and `tests/` is bounded.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "openjev"
EVALS = ROOT / "evals"
HARNESS = "evals.harness"

LAYERS: list[tuple[str, ...]] = [
    # Foundation: what every stage may use.
    (
        "errors",
        "endpoints",
        "collector",
        "options",
        "settings",
        "config",
        "calibration",
        "examples",
        "metrics",
        "affinity",
        "quality",
    ),
    # The request's journey, in order, each stage a package.
    ("request",),
    ("prompting",),
    ("backends",),
    ("answering",),
    ("tasks",),
    ("engine",),
    ("service",),
    ("api",),
    ("smoke", "batch", "cli", "__main__", "__init__"),
]
WEB_FRAMEWORKS = ("fastapi", "starlette", "uvicorn")
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 400
MAX_ENGINE_LINES = 300
#: Files of `src/` allowed within NEAR_LIMIT lines of MAX_FILE_LINES.
NEAR_LIMIT, MAX_NEAR_LIMIT_FILES = 10, 2
MAX_FMT_SKIPS = 80


def module_name(path: Path, root: Path = SOURCE.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The layer of the longest name in LAYERS that `module` (below `openjev.`) is or sits in."""
    parts = module.split(".")[1:] or ["__init__"]
    for length in range(len(parts), 0, -1):
        name = ".".join(parts[:length])
        for index, names in enumerate(LAYERS):
            if name in names:
                return index
    raise KeyError(module)


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def source_modules() -> dict[str, set[str]]:
    modules = {module_name(path): imports_of(path) for path in SOURCE.rglob("*.py")}
    return {
        name: {dep for dep in deps if dep in modules and dep not in (name, "openjev")} for name, deps in modules.items()
    } | {f"{name}#all": deps for name, deps in modules.items()}


def evals_modules() -> dict[str, set[str]]:
    """Every module of `evals/` and the `evals` modules it imports (its data and runs hold no code)."""
    modules = {module_name(path, ROOT): imports_of(path) for path in EVALS.rglob("*.py")}
    return {
        name: {dep for dep in deps if dep in modules and dep not in (name, "evals")} for name, deps in modules.items()
    }


def suite_packages() -> list[str]:
    return sorted(
        f"evals.{path.parent.name}" for path in EVALS.glob("*/__init__.py") if f"evals.{path.parent.name}" != HARNESS
    )


def python_files() -> list[Path]:
    return [
        path
        for folder in ("src", "tests", "benchmarks", "evals")
        for path in (ROOT / folder).rglob("*.py")
        if ".venv" not in path.parts
    ] + [ROOT / "modal_app.py"]


def test_no_function_is_longer_than_60_lines() -> None:
    long = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_no_file_is_longer_than_400_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in python_files()
        if (count := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert long == []


def test_the_engine_reads_in_under_300_lines_and_few_files_sit_at_the_limit() -> None:
    assert len((SOURCE / "engine.py").read_text().splitlines()) < MAX_ENGINE_LINES
    near = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in SOURCE.rglob("*.py")
        if (count := len(path.read_text().splitlines())) > MAX_FILE_LINES - NEAR_LIMIT
    ]
    assert len(near) <= MAX_NEAR_LIMIT_FILES, near


def test_fmt_skip_is_kept_for_aligned_tables_only() -> None:
    marker = "# fmt" + ": skip"  # spelled apart so this file does not count itself
    skips = {
        str(path.relative_to(ROOT)): count
        for folder in ("src", "tests")
        for path in (ROOT / folder).rglob("*.py")
        if (count := path.read_text().count(marker))
    }
    assert sum(skips.values()) <= MAX_FMT_SKIPS, sorted(skips.items(), key=lambda item: -item[1])


def test_imports_follow_the_layers_and_the_core_has_no_web_framework() -> None:
    modules = source_modules()
    upward = []
    for name, deps in modules.items():
        if name.endswith("#all"):
            real = name.removesuffix("#all")
            if layer_of(real) < layer_of("openjev.api"):
                upward += [f"{real} imports {dep}" for dep in deps if dep.split(".")[0] in WEB_FRAMEWORKS]
            continue
        upward += [f"{name} imports {dep}" for dep in deps if layer_of(dep) > layer_of(name)]
    assert upward == []


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_evals_harness_imports_no_suite_and_no_suite_another() -> None:
    suites = suite_packages()
    assert {"evals.mmlu", "evals.jev_dev"} <= set(suites)
    wrong = []
    for name, deps in evals_modules().items():
        owner = HARNESS if in_package(name, HARNESS) else next((s for s in suites if in_package(name, s)), None)
        if owner is not None:
            others = [suite for suite in suites if suite != owner]
            wrong += [f"{name} imports {dep}" for dep in deps if any(in_package(dep, other) for other in others)]
    assert wrong == []


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every cycle a depth-first walk of the import graph meets, as `a -> b -> a`."""
    # A package's __init__ re-exporting its own submodules is not a cycle worth reporting.
    graph = {name: {dep for dep in deps if not dep.startswith(name + ".")} for name, deps in graph.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*trail[trail.index(dep) :], dep]))
            elif dep not in state:
                visit(dep, [*trail, dep])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return cycles


def test_no_import_cycles() -> None:
    assert import_cycles({name: deps for name, deps in source_modules().items() if not name.endswith("#all")}) == []


def test_no_import_cycles_in_evals() -> None:
    assert import_cycles(evals_modules()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]
