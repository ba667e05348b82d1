"""Shared work in whole-node runs, end to end on a node of fake GPUs through real pytest-xdist
workers: stack-level tests once per node, split work in shares, node-wide tests a plugin declares,
and the beside lane whose work overlaps the GPU's numerics and ends before its timings."""

from __future__ import annotations

import json

import fake_node
import pytest

NODE_ARGS = ("--rocm-device=all", "-p", "no:cacheprovider", "--rocm-report=report.json")

LOGGED = """
import os, time
from pathlib import Path

import pytest

LOG = Path(__file__).parents[2] / "work.log"


def log(what):
    with LOG.open("a") as out:
        out.write(f"{os.environ.get('ROCM_VALIDATE_NODE_GPU')} {os.environ.get('ROCM_VALIDATE_NODE_LANE', 'main')} "
                  f"{what} {time.monotonic():.3f}\\n")
"""

SHARED_TESTS = (
    LOGGED
    + """

@pytest.mark.rocm_shared(seconds=60)
def test_compiled_model():
    log("compiled_model")


@pytest.mark.rocm_shared(seconds=30, group="llama")
def test_llama_compiled():
    log("llama_compiled")


@pytest.mark.rocm_shared(seconds=30, group="llama")
def test_llama_fp8():
    log("llama_fp8")


def test_per_gpu():
    log("per_gpu")


@pytest.mark.rocm_shared(split=True)
def test_split(rocm_share):
    log(f"split {rocm_share.position}/{rocm_share.count}")
"""
)


def _log(pytester: pytest.Pytester) -> list[list[str]]:
    return [line.split() for line in (pytester.path / "work.log").read_text().splitlines()]


def _report(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "report.json").read_text())


def test_shared_tests_run_once_per_node_balanced_over_the_gpus_and_split_tests_in_shares(
    pytester: pytest.Pytester,
) -> None:
    fake_node.write_node(pytester, 2, correctness__shared=SHARED_TESTS)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", *NODE_ARGS)
    result.assert_outcomes(passed=7)
    ran = sorted((gpu, what) for gpu, _, what, *_ in _log(pytester) if what != "split")
    assert ran == [
        ("0", "compiled_model"),
        ("0", "per_gpu"),
        ("1", "llama_compiled"),
        ("1", "llama_fp8"),
        ("1", "per_gpu"),
    ]
    splits = sorted((gpu, share) for gpu, _, what, share, _ in (line for line in _log(pytester) if line[2] == "split"))
    assert splits == [("0", "0/2"), ("1", "1/2")]
    work = {(t["nodeid"].split("::")[1], t["gpu"]["index"]): t["work"] for t in _report(pytester)["tests"]}
    assert work[("test_compiled_model", 0)] == "shared" and work[("test_per_gpu", 1)] == "per-gpu"
    assert work[("test_split", 1)] == "shared"


def test_outside_a_node_run_every_shared_test_runs_and_a_split_test_does_all_of_the_work(
    pytester: pytest.Pytester,
) -> None:
    fake_node.write_node(pytester, 2, correctness__shared=SHARED_TESTS)
    result = pytester.runpytest("--rocm-suite=correctness", "--rocm-device=cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    assert [line[2:-1] for line in _log(pytester) if line[2] == "split"] == [["split", "0/1"]]


def test_a_worker_left_with_no_test_of_its_own_does_not_end_the_run_as_empty(pytester: pytest.Pytester) -> None:
    only_shared = LOGGED + "\n\n@pytest.mark.rocm_shared\ndef test_once():\n    log('once')\n"
    fake_node.write_node(pytester, 2, correctness__once=only_shared)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", *NODE_ARGS)
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.assert_outcomes(passed=1)
    assert [line[:3] for line in _log(pytester)] == [["0", "main", "once"]]


SLEEPING = """

def test_{name}():
    log("{name}-start")
    time.sleep({sleep})
    log("{name}-end")
"""


def sleeping(**sleeps: float) -> str:
    """A test file whose test_<name> logs its start, sleeps, and logs its end."""
    return LOGGED + "".join(SLEEPING.format(name=name, sleep=sleep) for name, sleep in sleeps.items())


POOLED_CONFTEST = """

def pytest_rocm_node_wide(config, nodeid):
    return True if nodeid.endswith("::test_pooled") else None
"""


def test_the_beside_lane_trains_while_the_gpu_checks_numerics_and_ends_before_its_timings(
    pytester: pytest.Pytester,
) -> None:
    fake_node.write_node(
        pytester,
        2,
        correctness__numerics=sleeping(numerics=2.0),
        convergence__training=sleeping(training=3.0, pooled=0),
        perf__timing=sleeping(timing=0),
    )
    (pytester.path / "conftest.py").write_text((pytester.path / "conftest.py").read_text() + POOLED_CONFTEST)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness,convergence,perf", *NODE_ARGS)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*one pinned pytest-xdist worker each (--dist each), and a second beside it*"])
    events = {(gpu, what): float(at) for gpu, _, what, at in _log(pytester)}
    lanes = {(gpu, what.rsplit("-", 1)[0]): lane for gpu, lane, what, _ in _log(pytester)}
    for gpu in ("0", "1"):
        assert lanes[(gpu, "training")] == "beside" and lanes[(gpu, "numerics")] == "main"
        assert events[(gpu, "training-start")] < events[(gpu, "numerics-end")], "the lanes did not overlap"
        assert events[(gpu, "timing-start")] > events[(gpu, "training-end")], "a timing shared its GPU"
    pooled = [(gpu, lane) for gpu, lane, what, _ in _log(pytester) if what == "pooled-start"]
    assert pooled == [("0", "main")]
    assert events[("0", "pooled-start")] >= max(at for (_, what), at in events.items() if not what.startswith("pooled"))
    report = _report(pytester)
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    assert tests["test_pooled"]["gpu"] is None and tests["test_pooled"]["work"] == "node-wide"
    result.stdout.fnmatch_lines(
        [
            "rocm-validate level standard: * of its * budget for 2 GPUs",
            "*= rocm-validate time =*",
            "convergence * per gpu (beside) * 3 s * 3 s * -",
            "convergence * node wide * - * - * 0 s",
        ]
    )
    beside = {(r["suite"], r["gpu"]) for r in report["time"]["rows"] if r["beside"]}
    assert beside == {("convergence", 0), ("convergence", 1)} and report["time"]["gpus"] == 2


def test_the_time_section_says_when_each_lane_ran_and_how_long_timings_waited_for_the_beside_lane(
    pytester: pytest.Pytester,
) -> None:
    fake_node.write_node(
        pytester,
        2,
        correctness__numerics=sleeping(numerics=0.5, held=0),
        convergence__training=sleeping(training=3.0),
        perf__timing=sleeping(timing=0),
    )
    result = pytester.runpytest_subprocess("--rocm-suite=correctness,convergence,perf", *NODE_ARGS)
    result.assert_outcomes(passed=8)
    lanes = {(lane["gpu"], lane["lane"]): lane for lane in _report(pytester)["time"]["lanes"]}
    assert set(lanes) == {(0, "main"), (0, "beside"), (1, "main"), (1, "beside")}
    for gpu in (0, 1):
        main, beside = lanes[(gpu, "main")], lanes[(gpu, "beside")]
        assert beside["busy_s"] >= 3.0 and main["busy_s"] >= 0.5
        assert main["waited_s"] >= 2.0, "the numerics took 0.5 s, the training 3 s: the timing waited"
        assert main["waited_s"] <= main["idle_s"] < 15, "the beside worker's exit held the timing back"
        assert main["last_s"] >= beside["last_s"] >= beside["first_s"] > 0
    result.stdout.fnmatch_lines(
        [
            "startup * s (from the run's start to its first test)",
            "GPU 0 main worker: tests from * s to * s, * s in tests, * s between them (* s waiting for its beside lane)",
            "GPU 1 beside lane: tests from * s to * s, 3 s in tests, * s between them",
            "after the last test * s (the report, the workers ending)",
        ]
    )
