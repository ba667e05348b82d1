"""Maps that stay true: each package's docstring names every module in it, the README's Layout
table has a row for every room naming every module in it, and docs/extending.md names the whole
public API (every name in a user-facing module's `__all__`, every fixture, marker and hook).
Everything is read with `ast` and regular expressions; each rule has a negative control."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rocm_validate"
README = REPO / "README.md"
EXTENDING = REPO / "docs" / "extending.md"
NOT_MODULES = ("__init__", "__main__")


def modules_of(package: Path) -> list[str]:
    """The modules and subpackages of a package, by name."""
    files = [p.stem for p in package.glob("*.py") if p.stem not in NOT_MODULES]
    folders = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(files + folders)


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(\.py)?(?!\w)", text) is not None


def docstring_misses(package: Path) -> list[str]:
    """'<package>: <module>' for every module its docstring does not name; the package's
    subpackages are checked the same way."""
    missing = []
    for init in sorted([package / "__init__.py", *package.glob("*/__init__.py")]):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing += [f"{init.parent.name}: {m}" for m in modules_of(init.parent) if not _named(m, doc)]
    return missing


def layout_rows(readme: str) -> dict[str, str]:
    """The README's Layout table: its first cell (`rocm_validate/core/`) -> the row."""
    section = readme.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cell = re.match(r"\|\s*`([^`]+)`", line)
        if cell:
            rows[cell.group(1)] = line
    return rows


def layout_misses(package: Path, readme: str) -> list[str]:
    """Every room with no row in the README's Layout table, and every module its row does not name."""
    rows = layout_rows(readme)
    missing = []
    for room in modules_of(package):
        folder = package / room
        key = f"{package.name}/{room}/" if folder.is_dir() else f"{package.name}/{room}.py"
        if key not in rows:
            missing.append(f"no row for {key}")
            continue
        if folder.is_dir():
            missing += [f"{key} does not name {m}.py" for m in modules_of(folder) if f"`{m}.py`" not in rows[key]]
    return missing


def public_names(package: Path) -> dict[str, list[str]]:
    """module -> the names its `__all__` lists, for every module that has one."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
                found[module] = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return found


def _decorated_by(node: ast.FunctionDef, name: str) -> bool:
    return any(name in ast.unparse(d) for d in node.decorator_list)


def fixtures(package: Path) -> list[str]:
    return sorted(
        node.name
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and _decorated_by(node, "pytest.fixture")
    )


def hooks(package: Path) -> list[str]:
    tree = ast.parse((package / "core" / "hookspec.py").read_text())
    return sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _decorated_by(n, "hookspec"))


def markers() -> list[str]:
    from rocm_validate.core import levels, requirements
    from rocm_validate.core.suites import RUN_LAST_MARKER

    return sorted({m.split("(")[0] for m in requirements.MARKERS} | {levels.MARKER, RUN_LAST_MARKER})


def api_misses(package: Path, doc: str) -> list[str]:
    """Every public name (`__all__`, fixtures, markers, hooks) that `doc` does not name."""
    names = [f"{module}.{name}" for module, listed in public_names(package).items() for name in listed]
    wanted = [*names, *(f"fixture {f}" for f in fixtures(package)), *(f"marker {m}" for m in markers())]
    wanted += [f"hook {h}" for h in hooks(package)]
    return [w for w in wanted if not _named(w.split(".")[-1].split(" ")[-1], doc)]


# --- the maps are true ---------------------------------------------------------------------------


def test_every_package_docstring_names_each_of_its_modules():
    assert docstring_misses(PACKAGE) == []


def test_the_readme_layout_table_has_every_room_and_names_each_module():
    assert layout_misses(PACKAGE, README.read_text()) == []


def test_extending_docs_name_every_public_name_fixture_marker_and_hook():
    assert api_misses(PACKAGE, EXTENDING.read_text()) == []


def test_every_name_a_module_makes_public_exists():
    import importlib

    for module, names in public_names(PACKAGE).items():
        imported = importlib.import_module(module)
        assert [n for n in names if not hasattr(imported, n)] == [], module


# --- negative controls ---------------------------------------------------------------------------


def _copy_of_package(tmp_path: Path) -> Path:
    root = tmp_path / PACKAGE.name
    for source in PACKAGE.rglob("*.py"):
        target = root / source.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())
    return root


def test_a_module_missing_from_its_package_docstring_is_found(tmp_path):
    root = _copy_of_package(tmp_path)
    (root / "perf" / "pacing.py").write_text('"""A new module nobody mentioned."""\n')
    assert docstring_misses(root) == ["perf: pacing"]


def test_a_subpackage_missing_from_the_top_docstring_is_found(tmp_path):
    root = _copy_of_package(tmp_path)
    (root / "export").mkdir()
    (root / "export" / "__init__.py").write_text('"""Exports: nothing yet."""\n')
    assert docstring_misses(root) == [f"{root.name}: export"]


def test_a_room_missing_from_the_readme_layout_is_found(tmp_path):
    root = _copy_of_package(tmp_path)
    readme = re.sub(r"\n\| `rocm_validate/fleet/`[^\n]*", "", README.read_text())
    assert layout_misses(root, readme) == ["no row for rocm_validate/fleet/"]


def test_a_module_missing_from_its_layout_row_is_found(tmp_path):
    root = _copy_of_package(tmp_path)
    (root / "results" / "export.py").write_text('"""Exports."""\n')
    assert layout_misses(root, README.read_text()) == ["rocm_validate/results/ does not name export.py"]


def test_a_public_name_missing_from_the_extending_docs_is_found():
    doc = EXTENDING.read_text().replace("record_rocm_metric", "a fixture").replace("requires_fp8", "a marker")
    assert api_misses(PACKAGE, doc) == ["fixture record_rocm_metric", "marker requires_fp8"]
