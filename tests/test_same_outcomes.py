"""benchmarks/same_outcomes.py: a refactor's before/after reports compared test for test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "same_outcomes.py"


def _report(path: Path, tests: list[tuple[str, int | None, str]], work: str = "per-gpu") -> Path:
    rows = [{"nodeid": n, "gpu": None if g is None else {"index": g}, "outcome": o, "work": work} for n, g, o in tests]
    path.write_text(json.dumps({"tests": rows}))
    return path


def _compare(
    tmp_path: Path, before: list, after: list, *extra: str, work: str = "per-gpu"
) -> subprocess.CompletedProcess[str]:
    a, b = _report(tmp_path / "a.json", before, work), _report(tmp_path / "b.json", after, work)
    return subprocess.run([sys.executable, str(SCRIPT), str(a), str(b), *extra], capture_output=True, text=True)


def test_the_same_outcomes_on_the_same_gpus_exit_0(tmp_path):
    tests = [("t.py::a", 0, "passed"), ("t.py::a", 1, "passed"), ("t.py::b", None, "skipped")]
    done = _compare(tmp_path, tests, list(reversed(tests)))
    assert done.returncode == 0, done.stdout
    assert "same outcome" in done.stdout


def test_an_outcome_changed_on_one_gpu_is_named_and_exits_1(tmp_path):
    done = _compare(
        tmp_path,
        [("t.py::a", 0, "passed"), ("t.py::a", 1, "passed")],
        [("t.py::a", 0, "passed"), ("t.py::a", 1, "failed")],
    )
    assert done.returncode == 1
    assert "changed: t.py::a (GPU 1): passed -> failed" in done.stdout


def test_a_test_lost_or_added_is_named_unless_added_on_purpose(tmp_path):
    before = [("t.py::a", None, "passed"), ("t.py::gone", None, "passed")]
    after = [("t.py::a", None, "passed"), ("new.py::x", None, "passed")]
    done = _compare(tmp_path, before, after, "--new-ok", "new.py")
    assert done.returncode == 1
    assert "only before: t.py::gone: passed" in done.stdout
    assert "only after" not in done.stdout and "added on purpose (new.py): 1" in done.stdout


def test_a_shared_test_placed_on_another_gpu_is_the_same_but_its_outcome_still_counts(tmp_path):
    moved = _compare(tmp_path, [("t.py::s", 0, "passed")], [("t.py::s", 1, "passed")], work="shared")
    assert moved.returncode == 0, moved.stdout
    failed = _compare(tmp_path, [("t.py::s", 0, "passed")], [("t.py::s", 1, "failed")], work="shared")
    assert failed.returncode == 1 and "changed: t.py::s: passed -> failed" in failed.stdout
