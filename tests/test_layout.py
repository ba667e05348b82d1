"""The package's layout rules, checked on its imports (read with `ast`, nothing is imported):

* each subpackage imports only the layers below it (`ALLOWED`), so the suites (correctness,
  perf, convergence) never import each other and the facts layers never reach up;
* the torch-free layers (core, platform, results and the top-level modules) import no torch at
  module import, directly or through another module of the package, so `pytest --help` stays
  torch-free;
* imports form no cycle, counting every import: at module level, inside functions and under
  TYPE_CHECKING (a lazy import still ties two modules' designs together);
* the package root holds at most ten modules: everything else lives in a subpackage.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rocm_validate"
TOP = "(top)"  # the package's own top-level modules: plugin, errors, __init__

# What each part of the package may import from the others (any import, lazy ones included).
ALLOWED: dict[str, frozenset[str]] = {
    "platform": frozenset(),
    "results": frozenset({"platform"}),
    "workloads": frozenset({"platform"}),
    "core": frozenset({"platform", "results", "workloads"}),
    # Whole-node runs: above core (they wire pytest-xdist with core's options and outputs).
    "node": frozenset({"core", "platform", "results", "workloads"}),
    "correctness": frozenset({"core", "platform", "results", "workloads"}),
    "perf": frozenset({"core", "platform", "results", "workloads"}),
    "convergence": frozenset({"core", "platform", "results", "workloads"}),
    "preflight": frozenset({"core", "platform", "results"}),
    "collectives": frozenset({"core", "node", "platform", "results", "workloads"}),
    # The fleet merges node reports with the perf gate's noise band and contention evidence.
    "fleet": frozenset({"platform", "results", "perf"}),
    "cli": frozenset({"core", "platform", "results", "workloads", "convergence", "fleet"}),
    TOP: frozenset({"core", "node", "platform", "results"}),
}
ALWAYS_ALLOWED = frozenset({TOP})  # errors and __version__ serve every layer
TORCH_FREE = ("core", "node", "platform", "results", "fleet", TOP)
MAX_TOP_LEVEL_MODULES = 10


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int
    module_level: bool  # executed when the importing module is imported (not in a function or TYPE_CHECKING)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str, package: str) -> str | None:
    """'rocm_validate.perf.gate' -> 'perf'; 'rocm_validate.errors' -> TOP; outside -> None."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE_DIRS.get(package, set()) & {parts[1]})) else TOP


PACKAGE_DIRS: dict[str, set[str]] = {}


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, (ast.Name, ast.Attribute)) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def imports_of(path: Path, root: Path) -> list[Import]:
    """Every import of a project module in `path`, with whether it runs at module import."""
    package = root.name
    module = module_name(path, root)
    found: list[Import] = []

    def resolve(node: ast.ImportFrom) -> list[str]:
        if node.level:
            base = module.split(".")
            if path.name != "__init__.py":
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        return [prefix] if node.module else [f"{prefix}.{alias.name}" for alias in node.names]

    def visit(nodes: list[ast.stmt], module_level: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend(Import(module, a.name, node.lineno, module_level) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                for target in resolve(node):
                    # `from pkg import sub` names a submodule when pkg/sub(.py) exists
                    names = [f"{target}.{a.name}" for a in node.names] if node.module else [target]
                    found.extend(
                        Import(module, t if _is_module(t, root) else target, node.lineno, module_level) for t in names
                    )
            elif isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.body, False)
                visit(node.orelse, module_level)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for child in node.body:
                    visit([child], module_level and isinstance(node, ast.ClassDef))
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []) or []:
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child], module_level)

    visit(ast.parse(path.read_text()).body, True)
    return [i for i in found if i.target.split(".")[0] in (package, "torch")]


def _is_module(dotted: str, root: Path) -> bool:
    relative = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (root / relative).with_suffix(".py").is_file() or (root / relative / "__init__.py").is_file()


def package_imports(root: Path) -> list[Import]:
    PACKAGE_DIRS[root.name] = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    return [i for path in sorted(root.rglob("*.py")) for i in imports_of(path, root)]


def layer_breaches(imports: list[Import], package: str) -> list[str]:
    problems = []
    for imp in imports:
        source, target = part_of(imp.module, package), part_of(imp.target, package)
        if source is None or target is None or source == target or target in ALWAYS_ALLOWED:
            continue
        if target not in ALLOWED.get(source, frozenset()):
            problems.append(f"{imp.module} (line {imp.line}) imports {imp.target}: {source} may not import {target}")
    return problems


def torch_at_import(imports: list[Import], package: str) -> list[str]:
    """Torch-free modules that import torch when imported, directly or through the package."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.module_level:
            graph.setdefault(imp.module, set()).add("torch" if imp.target.split(".")[0] == "torch" else imp.target)
    problems = []
    for module in sorted(graph):
        if part_of(module, package) not in TORCH_FREE:
            continue
        path, _seen = _path_to(module, "torch", graph)
        if path:
            problems.append(f"{module} imports torch at import time via {' -> '.join(path)}")
    return problems


def _path_to(start: str, goal: str, graph: dict[str, set[str]]) -> tuple[list[str], set[str]]:
    stack, seen = [(start, [start])], {start}
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            candidates = [nxt] + [p for p in graph if nxt.startswith(p + ".")]  # a module, or a name in it
            for candidate in candidates:
                if candidate == goal:
                    return path + [goal], seen
                if candidate not in seen and candidate in graph:
                    seen.add(candidate)
                    stack.append((candidate, path + [candidate]))
    return [], seen


def import_cycles(imports: list[Import]) -> list[str]:
    """Every cycle among the package's imports, module-level, function-level and TYPE_CHECKING alike."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target != imp.module and imp.target.split(".")[0] != "torch":
            graph.setdefault(imp.module, set()).add(imp.target)
    cycles = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            back, _ = _path_to(target, module, graph)
            if back and not module.startswith(target + "."):  # a package importing its own child is not a cycle
                cycles.append(" -> ".join([module, *back]))
    return sorted(set(cycles))


# `--rocm-device`, from the option to the device a test gets: one way, each file entered once.
DEVICE_WALK = (
    "core/options.py",  # parses it into Settings.device
    "node/plan.py",  # the one reader of that selection: resolves the run plan (devices, this process's device)
    "core/session.py",  # RunState.device(): the plan's device
    "core/fixtures.py",  # rocm_device: the device a test gets
)


_AS_WRITTEN = ("argument", "kind")  # Settings.device as the user wrote it, quoted by messages and commands


def device_walk(root: Path) -> list[str]:
    """The files `--rocm-device` flows through, in order: where Settings.device is declared, every
    module that reads it as a selection (how the user wrote it, which a message or command quotes, aside), every
    module that builds a RunPlan, the module whose `device()` returns the plan's device, and the
    module that defines the rocm_device fixture."""
    steps: list[list[str]] = [[], [], [], []]
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        name = path.relative_to(root).as_posix()
        quoted = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in _AS_WRITTEN}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == "Settings":
                if any(isinstance(a, ast.AnnAssign) and ast.unparse(a.target) == "device" for a in node.body):
                    steps[0].append(name)
            elif _selects(node, quoted):
                steps[1].append(name)
            elif isinstance(node, ast.FunctionDef) and node.name == "device":
                returns = [r for r in ast.walk(node) if isinstance(r, ast.Return)]
                if any(ast.unparse(r) == "return self.plan.device" for r in returns):
                    steps[2].append(name)
            elif isinstance(node, ast.FunctionDef) and node.name == "rocm_device":
                steps[3].append(name)
    walk: list[str] = []
    for step in steps:
        walk += [name for name in dict.fromkeys(step) if name not in walk]
    return walk


def _selects(node: ast.AST, quoted: set[int]) -> bool:
    """Reads Settings.device as a selection, or builds the RunPlan from it."""
    if isinstance(node, ast.Call):
        return ast.unparse(node.func) == "RunPlan"
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "device"
        and ast.unparse(node.value).endswith("settings")
        and id(node) not in quoted
    )


def top_level_modules(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*.py"))


# --- the rules hold for this package -------------------------------------------------------------


def test_each_layer_imports_only_the_layers_below_it():
    assert layer_breaches(package_imports(PACKAGE), PACKAGE.name) == []


def test_core_platform_and_results_import_no_torch_at_import_time():
    assert torch_at_import(package_imports(PACKAGE), PACKAGE.name) == []


def test_no_import_forms_a_cycle_at_module_or_function_level():
    assert import_cycles(package_imports(PACKAGE)) == []


def test_the_package_root_holds_at_most_ten_modules():
    modules = top_level_modules(PACKAGE)
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_the_device_option_flows_one_way_through_four_files():
    walk = device_walk(PACKAGE)
    assert walk == list(DEVICE_WALK) and len(walk) <= 4


# --- negative controls: the rules fail when a module breaks them --------------------------------


def _planted_package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE.name
    for source in PACKAGE.rglob("*.py"):
        target = root / source.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())
    for name, text in files.items():
        path = root / name
        path.write_text(path.read_text() + "\n" + text if path.exists() else text)
    return root


def test_a_correctness_module_importing_the_perf_suite_is_a_breach(tmp_path):
    root = _planted_package(tmp_path, {"correctness/compare.py": "from ..perf import gate  # noqa\n"})
    assert layer_breaches(package_imports(root), root.name) == [
        f"{root.name}.correctness.compare (line {_last_line(root / 'correctness/compare.py')}) imports "
        f"{root.name}.perf.gate: correctness may not import perf"
    ]


def test_a_lazy_import_between_suites_is_a_breach_too(tmp_path):
    root = _planted_package(
        tmp_path, {"perf/gate.py": "def _late():\n    from rocm_validate.convergence import mlperf  # noqa\n"}
    )
    assert any("perf may not import convergence" in p for p in layer_breaches(package_imports(root), root.name))


def test_torch_reached_through_another_module_is_found(tmp_path):
    root = _planted_package(tmp_path, {"platform/arch.py": "from rocm_validate.workloads import fp8  # noqa\n"})
    problems = torch_at_import(package_imports(root), root.name)
    assert any(p.startswith("rocm_validate.platform.arch imports torch") and "workloads.fp8" in p for p in problems)


def test_an_import_cycle_is_found(tmp_path):
    root = _planted_package(tmp_path, {"platform/arch.py": "from rocm_validate.platform import devices  # noqa\n"})
    assert any(
        "rocm_validate.platform.arch" in c and "rocm_validate.platform.devices" in c
        for c in import_cycles(package_imports(root))
    )


def test_a_cycle_closed_by_an_import_inside_a_function_is_found(tmp_path):
    root = _planted_package(
        tmp_path, {"core/levels.py": "def _late():\n    from rocm_validate.core import options  # noqa\n"}
    )
    assert any(
        "rocm_validate.core.levels" in c and "rocm_validate.core.options" in c
        for c in import_cycles(package_imports(root))
    )


def test_a_cycle_closed_under_type_checking_is_found(tmp_path):
    planted = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rocm_validate.platform import devices  # noqa\n"
    )
    root = _planted_package(tmp_path, {"platform/peaks.py": planted})
    assert any("rocm_validate.platform.peaks" in c for c in import_cycles(package_imports(root)))


def test_an_eleventh_top_level_module_breaks_the_limit(tmp_path):
    root = _planted_package(tmp_path, {f"extra_{i}.py": "" for i in range(MAX_TOP_LEVEL_MODULES)})
    assert len(top_level_modules(root)) > MAX_TOP_LEVEL_MODULES


def _last_line(path: Path) -> int:
    return len(path.read_text().rstrip("\n").splitlines())


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_every_part_of_the_allowed_table_is_a_real_subpackage(part):
    assert part == TOP or (PACKAGE / part / "__init__.py").is_file()


def test_a_second_reader_of_the_device_selection_lengthens_the_walk(tmp_path):
    root = _planted_package(tmp_path, {"core/header.py": "def _choose(settings):\n    return settings.device\n"})
    assert device_walk(root) == [DEVICE_WALK[0], "core/header.py", *DEVICE_WALK[1:]]


def test_quoting_the_selection_in_a_message_is_no_step_of_the_walk(tmp_path):
    root = _planted_package(tmp_path, {"core/header.py": "def _say(settings):\n    return settings.device.argument\n"})
    assert device_walk(root) == list(DEVICE_WALK)
