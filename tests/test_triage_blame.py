"""A node-wide test (a collective over every GPU) that names the GPUs its failure points at: its
result fails on those GPUs and passes on the others, so the verdict drains the GPU instead of
rolling back the image; without a name, or naming every GPU, it stays every GPU's failure."""

from __future__ import annotations

import json
from pathlib import Path

import fake_node
import pytest

from rocm_validate.core.categorize import CategorizedFailure, blame_property, fail_as
from rocm_validate.perf.recorder import ItemPerfState
from rocm_validate.results.metrics import GpuRef
from rocm_validate.results.report import REPORT_SCHEMA, check_records
from rocm_validate.results.report import TestResult as Result
from rocm_validate.results.triage import BLAME_PROPERTY, verdict

NODE = [GpuRef(0, "0000:00:06.0"), GpuRef(1, "0000:00:07.0")]
PARITY = "suites/collectives/test_training.py::test_parity[fp32]"


def node_wide(blamed: tuple[int, ...] = (), category: str | None = "numerics", outcome: str = "failed") -> Result:
    return Result(PARITY, suite="collectives", outcome=outcome, category=category, work="node-wide", blamed_gpus=blamed)


def line(*results: Result) -> str:
    return verdict(check_records(results, 0, NODE, "0000:00:06.0"))


def test_a_node_wide_failure_blaming_one_gpu_drains_that_gpu_and_the_others_pass() -> None:
    records = check_records([node_wide((1,))], 0, NODE, "0000:00:06.0")
    assert [(r.gpu, r.category, r.bdf) for r in records] == [(0, None, "0000:00:06.0"), (1, "numerics", "0000:00:07.0")]
    assert line(node_wide((1,))) == (
        "rocm-validate verdict: GPU 1 (BDF 0000:00:07.0): drain and triage (numerics: 1 that passed on the other GPUs)"
    )


def test_a_node_wide_failure_without_blame_is_still_a_software_regression() -> None:
    assert line(node_wide()) == (
        "rocm-validate verdict: software regression: roll back the image (numerics: 2 on every one of 2 GPUs)"
    )


def test_a_node_wide_failure_blaming_every_gpu_is_a_software_regression() -> None:
    assert "software regression: roll back the image (numerics: 2 on every one of 2 GPUs)" in line(node_wide((0, 1)))


def test_a_blamed_index_outside_the_node_is_ignored() -> None:
    assert "roll back the image (numerics: 2 on every one of 2 GPUs)" in line(node_wide((7,)))
    assert line(node_wide((1, 7))).startswith("rocm-validate verdict: GPU 1 (BDF 0000:00:07.0): drain and triage")


def _blaming_gpu_1(test: str) -> Result:
    """A training test of the node that failed as hardware, blaming GPU 1."""
    return Result(
        f"suites/collectives/test_training.py::{test}",
        suite="collectives",
        outcome="failed",
        category="hardware",
        work="node-wide",
        blamed_gpus=(1,),
    )


def test_a_slow_gpu_blamed_as_hardware_is_drained_with_the_throughput_loss_it_explains() -> None:
    held_back = _blaming_gpu_1("test_no_gpu_holds_the_step_back[fsdp]")
    throughput = _blaming_gpu_1("test_the_step_over_the_node_holds_its_baseline[fsdp]")
    assert (
        line(held_back, throughput) == "rocm-validate verdict: GPU 1 (BDF 0000:00:07.0): drain and triage (hardware: 2)"
    )


def test_blame_is_ignored_outside_a_whole_node_run_and_on_a_passed_test() -> None:
    alone = check_records([node_wide((1,))], 0, (), "0000:00:06.0")
    assert [(r.gpu, r.category) for r in alone] == [(0, "numerics")]
    passed = check_records([node_wide((1,), category=None, outcome="passed")], 0, NODE)
    assert [r.category for r in passed] == [None, None]


def test_the_report_carries_the_blamed_gpus_and_an_old_report_without_them_still_validates() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    test = node_wide((1,)).to_dict()
    assert test["blamed_gpus"] == [1]
    report = {
        "schema": "rocm-validate/report/1",
        "created": "2026-11-28T00:00:00+00:00",
        "command": "pytest",
        "device": None,
        "environment": {},
        "settings": {},
        "summary": {},
        "tests": [test],
        "metrics": [],
    }
    jsonschema.validate(report, REPORT_SCHEMA)
    del test["blamed_gpus"]
    jsonschema.validate(report, REPORT_SCHEMA)


def test_fail_as_carries_each_gpu_it_blames_once_and_the_property_reads_back() -> None:
    with pytest.raises(CategorizedFailure) as failed:
        fail_as("numerics", "rank 1 contributed a wrong gradient", gpus=[1, 1])
    assert failed.value.gpus == (1,)
    assert blame_property([(BLAME_PROPERTY, json.dumps([1]))]) == (1,)
    assert blame_property([]) == ()


def test_a_perf_test_blames_a_gpu_only_when_every_failed_metric_does() -> None:
    held = ItemPerfState()
    held.fail("tokens/s: regressed; held back by one GPU", "hardware", gpus=(1,))
    held.fail("scaling_efficiency: regressed; held back by one GPU", "hardware", gpus=(1,))
    assert held.verdict() == ("hardware", (1,))
    held.fail("peak_memory: regressed", "performance")  # a loss the slow GPU does not explain: the node's
    assert held.verdict() == ("performance", ())


BLAMING = """
from rocm_validate.core.categorize import fail_as

def test_group():
    fail_as("numerics", "rank 1 on GPU 1 contributed a wrong gradient", gpus=[1])
"""

UNBLAMED = """
def test_group():
    assert False, "the N-rank step is 1e-2 from the one-rank step"
"""


def _node_run(pytester: pytest.Pytester, source: str) -> tuple[pytest.RunResult, dict]:
    fake_node.write_node(pytester, 2, collectives__group=source)
    result = pytester.runpytest_subprocess(
        "--rocm-suite=collectives", "--rocm-device=all", "--rocm-report=report.json", "-p", "no:cacheprovider"
    )
    return result, json.loads((pytester.path / "report.json").read_text())


def test_a_whole_node_run_drains_the_gpu_a_node_wide_test_blames(pytester: pytest.Pytester) -> None:
    result, report = _node_run(pytester, BLAMING)
    result.assert_outcomes(failed=1)
    [test] = report["tests"]
    assert test["work"] == "node-wide" and test["blamed_gpus"] == [1] and test["category"] == "numerics"
    assert report["verdict"] == (
        "rocm-validate verdict: GPU 1 (BDF 0000:02:00.0): drain and triage (numerics: 1 that passed on the other GPUs)"
    )


def test_a_whole_node_run_rolls_back_the_image_when_the_node_wide_test_blames_no_gpu(pytester: pytest.Pytester) -> None:
    result, report = _node_run(pytester, UNBLAMED)
    result.assert_outcomes(failed=1)
    assert report["tests"][0]["blamed_gpus"] == []
    assert report["verdict"] == (
        "rocm-validate verdict: software regression: roll back the image (numerics: 2 on every one of 2 GPUs)"
    )


SUITE = Path(__file__).parents[1] / "suites" / "collectives" / "test_training.py"
FAKE_STEPS = """

import json
import pytest
from rocm_validate.collectives.plan import gpu_world
from rocm_validate.collectives.plugin import StepsRun
from rocm_validate.collectives.steps import CPU_STEPS


@pytest.fixture(scope="session")
def training_steps():
    world = gpu_world([(0, "GPU 0 (BDF 0000:01:00.0)"), (1, "GPU 1 (BDF 0000:02:00.0)")], {})
    return StepsRun(CPU_STEPS, world, tuple(json.loads(RESULTS)), ())
"""


def _rank(own: list[float], wait_s: float, step_s: float = 0.1) -> dict:
    """One rank's training-steps result: its own gradient prints (its peer computed [1, 2] for
    it), the fsdp step's times and its wait in the all-gathers."""
    parity = {"loss_distance": 1e-7, "update_distance": 1e-6, "tokens": 128, "own_prints": own, "peer_prints": [1, 2]}
    fsdp = {
        "group_s": [step_s, step_s],
        "solo_s": [0.09, 0.09],
        "work_per_rank": 8192,
        "flops_per_rank": 1e12,
        "wait_s": wait_s,
        "layers": 2,
    }
    return {"parity": {"fp32": parity, "bf16": parity}, "fsdp": fsdp}


def _training_run(pytester: pytest.Pytester, *ranks: dict, options: tuple[str, ...] = ()) -> dict:
    """The training suite's own tests on a fake 2-GPU node, over the given ranks' results."""
    fake_node.write_node(pytester, 2, collectives__training=SUITE.read_text())
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + FAKE_STEPS + f"\nRESULTS = {json.dumps(json.dumps(ranks))}\n")
    (pytester.path / "baselines").mkdir(exist_ok=True)
    pytester.runpytest_subprocess(
        "--rocm-suite=collectives",
        "--rocm-device=all",
        "--rocm-report=report.json",
        "--rocm-baselines=baselines",
        "-p",
        "no:cacheprovider",
        *options,
    )
    return json.loads((pytester.path / "report.json").read_text())


def test_the_training_suite_drains_the_gpu_whose_rank_gave_a_wrong_gradient_and_held_the_step_back(
    pytester: pytest.Pytester,
) -> None:
    report = _training_run(pytester, _rank([1, 2], 0.030), _rank([1.01, 2.02], 0.002))
    failed = {t["nodeid"].split("::")[1]: (t["category"], t["blamed_gpus"]) for t in report["tests"] if t["category"]}
    assert failed == {
        "test_the_sharded_step_computes_what_one_rank_computes[fp32]": ("numerics", [1]),
        "test_the_sharded_step_computes_what_one_rank_computes[bf16]": ("numerics", [1]),
        "test_no_gpu_holds_the_step_back[fsdp]": ("hardware", [1]),
    }
    assert report["verdict"] == (
        "rocm-validate verdict: GPU 1 (BDF 0000:02:00.0): drain and triage (numerics: 2, hardware: 1 that passed on "
        "the other GPUs)"
    )


def test_the_steps_throughput_loss_while_one_rank_held_it_back_is_that_gpus_not_the_images(
    pytester: pytest.Pytester,
) -> None:
    healthy = _rank([1, 2], 0.002)
    _training_run(pytester, healthy, healthy, options=("--update-baselines",))
    report = _training_run(pytester, _rank([1, 2], 0.030, 0.15), _rank([1, 2], 0.002, 0.15))
    failed = {t["nodeid"].split("::")[1]: (t["category"], t["blamed_gpus"]) for t in report["tests"] if t["category"]}
    assert failed == {
        "test_the_step_over_the_node_holds_its_baseline[fsdp]": ("hardware", [1]),
        "test_no_gpu_holds_the_step_back[fsdp]": ("hardware", [1]),
    }
    assert report["verdict"] == "rocm-validate verdict: GPU 1 (BDF 0000:02:00.0): drain and triage (hardware: 2)"


def test_a_step_one_rank_held_back_is_never_recorded_as_a_baseline(pytester: pytest.Pytester) -> None:
    held = (_rank([1, 2], 0.030, 0.15), _rank([1, 2], 0.002, 0.15))
    report = _training_run(pytester, *held, options=("--update-baselines", "--rocm-accept-regressions"))
    verdicts = {m["name"].rsplit(".", 1)[1]: m["verdict"] for m in report["metrics"]}
    assert verdicts["tokens_per_s_per_gpu"] == verdicts["scaling_efficiency"] == "refused"
    assert not list((pytester.path / "baselines").glob("*.json"))
    failed = {t["nodeid"].split("::")[1]: (t["category"], t["blamed_gpus"]) for t in report["tests"] if t["category"]}
    assert failed["test_the_step_over_the_node_holds_its_baseline[fsdp]"] == ("hardware", [1])


def test_the_same_step_with_no_rank_held_back_is_recorded(pytester: pytest.Pytester) -> None:
    healthy = _rank([1, 2], 0.002, 0.15)
    report = _training_run(pytester, healthy, healthy, options=("--update-baselines",))
    assert {m["verdict"] for m in report["metrics"] if m["name"].startswith("train.fsdp")} == {"updated"}
    assert list((pytester.path / "baselines").glob("*.json"))


def test_the_steps_throughput_loss_with_no_rank_holding_it_back_is_the_images(pytester: pytest.Pytester) -> None:
    healthy = _rank([1, 2], 0.002)
    _training_run(pytester, healthy, healthy, options=("--update-baselines",))
    slow = _rank([1, 2], 0.002, 0.15)
    report = _training_run(pytester, slow, slow)
    assert report["verdict"].startswith(
        "rocm-validate verdict: software regression: roll back the image (performance: 2 on every one of 2 GPUs)"
    )


def test_the_training_suite_rolls_back_the_image_when_every_rank_gave_a_wrong_gradient(
    pytester: pytest.Pytester,
) -> None:
    report = _training_run(pytester, _rank([1.01, 2.02], 0.002), _rank([1.01, 2.02], 0.002))
    assert report["verdict"] == (
        "rocm-validate verdict: software regression: roll back the image (numerics: 4 on every one of 2 GPUs)"
    )


COLLECTIVES = Path(__file__).parents[1] / "suites" / "collectives" / "test_collectives.py"
FAKE_COLLECTIVES = """

import dataclasses
import pytest
from rocm_validate.collectives.outcome import summarize
from rocm_validate.collectives.plan import CPU_PLAN, gpu_world
from rocm_validate.collectives.plugin import CollectiveRun


def _rank(mismatch):
    return {"steps": [{"op": "all_reduce", "bytes": 4096, "mismatch": mismatch, "seconds": [1e-3]}], "p2p": []}


@pytest.fixture(scope="session")
def collectives():
    world = gpu_world([(0, "GPU 0 (BDF 0000:01:00.0)"), (1, "GPU 1 (BDF 0000:02:00.0)")], {})
    outcome = summarize([_rank(m) for m in MISMATCHES], world.labels, "nccl")
    return CollectiveRun(dataclasses.replace(CPU_PLAN, sizes=(4096,)), world, outcome)
"""


@pytest.mark.parametrize(
    ("mismatches", "verdict_line"),
    [
        (
            [None, "3 / 1024 elements differ"],
            "GPU 1 (BDF 0000:02:00.0): drain and triage (numerics: 1 that passed on the other GPUs)",
        ),
        (
            ["3 / 1024 elements differ"] * 2,
            "software regression: roll back the image (numerics: 2 on every one of 2 GPUs)",
        ),
    ],
    ids=["one-rank-wrong", "every-rank-wrong"],
)
def test_a_collective_wrong_on_one_rank_drains_its_gpu_and_wrong_on_every_rank_rolls_back_the_image(
    pytester: pytest.Pytester, mismatches: list, verdict_line: str
) -> None:
    fake_node.write_node(pytester, 2, collectives__collectives=COLLECTIVES.read_text())
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + FAKE_COLLECTIVES + f"\nMISMATCHES = {mismatches!r}\n")
    pytester.runpytest_subprocess(
        "suites/collectives/test_collectives.py::test_every_rank_holds_exactly_the_expected_result[all_reduce]",
        "--rocm-suite=collectives",
        "--rocm-device=all",
        "--rocm-report=report.json",
        "-p",
        "no:cacheprovider",
    )
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["verdict"] == f"rocm-validate verdict: {verdict_line}"
