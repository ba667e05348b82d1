"""The run context (`core.session.RunState`): the package's one run-level stash key, and the
typed parts each concern keeps in it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocm_validate.core.session import STATE_KEY, RunState, find_part
from rocm_validate.errors import UsageError

PACKAGE = Path(__file__).resolve().parents[1] / "rocm_validate"
# Per test (item.stash), not per run: each test's own state, which the run context does not hold.
ITEM_KEYS = frozenset({"PENDING_METRICS_KEY", "SUITE_KEY", "ITEM_STATE_KEY", "_OOM_KEY"})


def stash_keys(root: Path) -> list[str]:
    """'core/session.py: STATE_KEY' for every `NAME = pytest.StashKey[...]()` under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            made = node.value.func
            if isinstance(made, ast.Subscript) and ast.unparse(made.value).endswith("StashKey"):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                found += [f"{path.relative_to(root).as_posix()}: {name}" for name in names]
    return found


def run_level(keys: list[str]) -> list[str]:
    return [key for key in keys if key.split(": ")[1] not in ITEM_KEYS]


def test_the_package_keeps_one_run_level_stash_key_the_run_contexts() -> None:
    assert run_level(stash_keys(PACKAGE)) == ["core/session.py: STATE_KEY"]


def test_a_second_run_level_stash_key_is_found(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core/session.py").write_text("STATE_KEY = pytest.StashKey[RunState]()\n")
    (tmp_path / "perf.py").write_text('import pytest\nFLOORS_KEY = pytest.StashKey["list[str]"]()\n')
    assert run_level(stash_keys(tmp_path)) == ["core/session.py: STATE_KEY", "perf.py: FLOORS_KEY"]


def test_an_item_stash_key_is_not_a_run_level_one(tmp_path: Path) -> None:
    (tmp_path / "oom.py").write_text("from pytest import StashKey\n_OOM_KEY = StashKey[bool]()\n")
    assert stash_keys(tmp_path) == ["oom.py: _OOM_KEY"] and run_level(stash_keys(tmp_path)) == []


@dataclass
class SuiteRecord:
    value: int


def _context() -> tuple[Any, RunState]:
    class Config:
        stash = pytest.Stash()

    config: Any = Config()
    state = RunState(config=config, resolve=lambda state: None)  # type: ignore[arg-type,return-value]
    config.stash[STATE_KEY] = state
    return config, state


def test_a_part_put_in_the_context_is_read_back_by_its_type() -> None:
    config, state = _context()
    state.put(SuiteRecord(3))
    assert state.part(SuiteRecord) == SuiteRecord(3) and find_part(config, SuiteRecord) == SuiteRecord(3)


def test_a_part_never_filled_is_a_usage_error_naming_its_module() -> None:
    _, state = _context()
    with pytest.raises(UsageError, match=rf"{__name__} holds no SuiteRecord for this run.*-p no:{__name__}"):
        state.part(SuiteRecord)


def test_a_part_is_not_found_without_a_context_or_once_dropped() -> None:
    class Config:
        stash = pytest.Stash()

    assert find_part(Config(), SuiteRecord) is None  # type: ignore[arg-type]
    config, state = _context()
    state.put(SuiteRecord(3))
    state.drop(SuiteRecord)
    assert find_part(config, SuiteRecord) is None
