"""Compile once: the compile cache folder is chosen once, every process of the run gets it, a
second run finds its graphs there, and the compile-time metric says whether the cache was warm."""

from __future__ import annotations

import json
from pathlib import Path

import fake_node
import pytest

from rocm_validate.core.compile_cache import (
    CacheContents,
    CompileCache,
    cache_state,
    contents,
    default_folder,
    resolve,
)

HOME = Path("/home/user")


def test_the_option_wins_over_a_torchinductor_cache_dir_already_set():
    env = {"TORCHINDUCTOR_CACHE_DIR": "/other"}
    assert resolve("/fast/cache", "--rocm-compile-cache", env, HOME) == CompileCache(
        Path("/fast/cache"), "--rocm-compile-cache"
    )


def test_without_the_option_a_torchinductor_cache_dir_already_set_is_kept():
    cache = resolve(None, "--rocm-compile-cache", {"TORCHINDUCTOR_CACHE_DIR": "/other"}, HOME)
    assert cache == CompileCache(Path("/other"), "TORCHINDUCTOR_CACHE_DIR (environment)")


def test_the_default_folder_is_under_the_users_cache_folder():
    assert default_folder({}, HOME) == HOME / ".cache" / "rocm-validate" / "inductor"
    assert default_folder({"XDG_CACHE_HOME": "/xdg"}, HOME) == Path("/xdg/rocm-validate/inductor")
    assert resolve(None, "--rocm-compile-cache", {}, HOME).source == "default"


def test_off_switches_the_caches_off_and_compiles_in_a_folder_of_the_run_alone():
    cache = resolve("OFF", "ROCM_VALIDATE_COMPILE_CACHE (environment)", {}, HOME)
    assert cache.folder is None
    assert cache.environment(Path("/tmp/run")) == {
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/run",
    }


def test_a_cache_folder_turns_both_caches_on_and_says_how_to_clear_it():
    cache = CompileCache(Path("/c/inductor"), "default")
    assert cache.environment() == {
        "TORCHINDUCTOR_CACHE_DIR": "/c/inductor",
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
    }
    assert cache.clear_command() == "rm -rf /c/inductor"


@pytest.mark.parametrize(
    ("after", "state"),
    [
        ({"fxgraph_cache_hit": 2, "autograd_cache_hit": 1}, "warm"),
        ({"fxgraph_cache_miss": 2, "autograd_cache_miss": 1}, "cold"),
        ({"fxgraph_cache_hit": 1, "fxgraph_cache_miss": 1}, "partly warm"),
        ({}, "not cached"),
    ],
)
def test_the_cache_state_of_a_compile_comes_from_inductors_counters(after, state):
    assert cache_state({"fxgraph_cache_hit": 0}, after) == state


def test_an_empty_or_missing_folder_is_cold_and_a_filled_one_warm(tmp_path):
    assert contents(tmp_path / "none") == CacheContents(0, 0)
    (tmp_path / "fxgraph" / "ab").mkdir(parents=True)
    (tmp_path / "fxgraph" / "ab" / "entry").write_bytes(b"x" * 2048)
    found = contents(tmp_path)
    assert found == CacheContents(1, 2048) and found.warm and found.describe() == "warm: 1 files, 0 MiB"
    assert CacheContents(0, 0).describe() == "empty: this run compiles cold"


COMPILES = """
import torch
from rocm_validate.core.compile_cache import CompileWatch


def test_compiles_a_small_model(record_rocm_metric):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    with CompileWatch() as cache:
        torch.compile(model)(torch.randn(4, 8, requires_grad=True)).sum().backward()
    record_rocm_metric("compile.small.seconds", 1.0, "s", better="lower", extra=cache.extra())
"""


def _state(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    result = pytester.runpytest_subprocess(
        "--rocm-suite=correctness", "--rocm-device=cpu", "--rocm-report=report.json", "-p", "no:cacheprovider", *args
    )
    report = json.loads((pytester.path / "report.json").read_text())
    return result, report["metrics"][0]["extra"]["compile_cache"]


def test_a_second_run_finds_the_first_runs_graphs_in_the_cache_folder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{"suites/correctness/test_compile.py": COMPILES})
    folder = pytester.path / "inductor"
    first, cold = _state(pytester, f"--rocm-compile-cache={folder}")
    first.stdout.fnmatch_lines(
        [f"rocm-validate compile cache: {folder} (empty: this run compiles cold); clear it with: rm -rf {folder}"]
    )
    second, warm = _state(pytester, f"--rocm-compile-cache={folder}")
    second.stdout.fnmatch_lines([f"rocm-validate compile cache: {folder} (warm: * files, * MiB)*"])
    assert (cold, warm) == ("cold", "warm")
    off, state = _state(pytester, "--rocm-compile-cache=off")
    off.stdout.fnmatch_lines(
        ["rocm-validate compile cache: off (--rocm-compile-cache): every torch.compile compiles cold"]
    )
    assert state == "not cached"


PINNED_ENV = """
import os


def test_sees_the_runs_cache():
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.environ["EXPECTED_CACHE"]
    assert os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] == os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "1"
"""


def test_every_pinned_worker_of_a_node_run_shares_the_cache_folder(pytester: pytest.Pytester, monkeypatch) -> None:
    fake_node.write_node(pytester, 2, correctness__env=PINNED_ENV)
    folder = pytester.path / "shared-cache"
    monkeypatch.setenv("EXPECTED_CACHE", str(folder))
    monkeypatch.setenv("ROCM_VALIDATE_COMPILE_CACHE", str(folder))
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", "--rocm-device=all", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_an_unwritable_cache_folder_is_a_usage_error_naming_the_option(pytester: pytest.Pytester) -> None:
    blocker = pytester.path / "file"
    blocker.write_text("")
    pytester.makepyfile(**{"suites/correctness/test_x.py": "def test_x():\n    pass\n"})
    result = pytester.runpytest_subprocess(
        "--rocm-suite=correctness", "--rocm-device=cpu", f"--rocm-compile-cache={blocker}/inductor"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-compile-cache=*/file/inductor: cannot keep compile caches there: * choose a writable folder *"]
    )
