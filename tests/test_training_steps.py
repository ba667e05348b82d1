"""The node's training steps on the CPU, as CI runs them: the N-rank vs one-rank parity check at
world size 2 over gloo (fp32 within the error model, bf16 within its measured tolerance), run as
two torchrun "nodes" on this machine (rank 0 writes the report), a rank planted to contribute a
wrong gradient named, the Float8 step's skip on the CPU, and the verdicts' own rules (the straggler,
the plants, the plan, the Float8 speedup) with their negative controls."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import pytest
from torchrun_nodes import two_nodes

from rocm_validate.collectives.launch import run_ranks
from rocm_validate.collectives.plan import cpu_world
from rocm_validate.collectives.plugin import StepsRun
from rocm_validate.collectives.steps import (
    CPU_STEPS,
    STANDARD_JOBS,
    STRAGGLER_FRACTION,
    TIMED_JOBS,
    Plant,
    StepsPlan,
    Throughput,
    fp32_bound,
    parity,
    parser,
    plan_for,
    plan_from_arguments,
    speedup,
    throughput,
)
from suites.collectives import test_training as suite

PARITY_ONLY = dataclasses.replace(CPU_STEPS, jobs=("parity",))


def test_two_torchrun_nodes_compute_what_one_rank_computes_in_fp32_and_bf16(tmp_path: Path) -> None:
    """One gloo rank per torchrun agent, meeting through torchrun's c10d rendezvous, as across nodes."""
    out = tmp_path / "report.json"
    program = ["rocm_validate.collectives.training", "--jobs", "parity", "--out", str(out)]
    codes, output = two_nodes(tmp_path, program, 240)
    assert codes == [0, 0] and out.exists(), output[-3000:]
    report = json.loads(out.read_text())
    assert report["passed"] and [r["rank"] for r in report["results"]] == [0, 1], report["verdicts"]
    assert [line.split(":")[0] for line in report["verdicts"]] == ["passed fp32", "passed bf16"]
    fp32 = parity("fp32", report["results"], ["rank 0", "rank 1"])
    assert fp32.allowed == fp32_bound(2 * 2 * 32)
    assert fp32.distance < fp32.allowed / 5, f"fp32 parity uses more than a fifth of its bound: {fp32.message()}"


def _ranks_run(tmp_path: Path, plan: StepsPlan) -> list[dict]:
    world = cpu_world(2)
    results, notes = run_ranks(
        "rocm_validate.collectives.training", plan.arguments(), plan.timeout_s, world, os.environ, tmp_path, "training/"
    )
    assert not notes and all(r and not r["error"] for r in results), (notes, results)
    return [r for r in results if r]


def _parity_run(tmp_path: Path, *plants: Plant) -> list[dict]:
    return _ranks_run(tmp_path, dataclasses.replace(PARITY_ONLY, plants=plants))


def test_a_rank_that_contributes_a_wrong_gradient_fails_parity_and_is_named(tmp_path: Path) -> None:
    results = _parity_run(tmp_path, Plant("grad", 1, 1.01))
    labels = cpu_world(2).labels
    for precision in ("fp32", "bf16"):
        check = parity(precision, results, labels)
        assert not check.passed
        assert len(check.wrong_contributions) == 1 and check.wrong_ranks == (1,), check.message()
        assert check.wrong_contributions[0].startswith("rank 1 on the CPU contributed a wrong gradient"), (
            check.message()
        )


def _throughput(waits: tuple[float | None, ...]) -> Throughput:
    return Throughput("fsdp", 0.1, (0.09, 0.09), (0.01, 0.01), 8192, 1e14, (None, None), waits, 0.01, 2)


def test_the_rank_the_others_wait_for_is_named() -> None:
    found = _throughput((0.030, 0.002)).straggler(["rank 0 on GPU 0", "rank 1 on GPU 1"])
    assert found is not None and found.rank == 1, found
    assert found.message.startswith("rank 1 on GPU 1 holds the fsdp step back"), found.message


def test_waits_that_differ_by_less_than_the_fraction_name_nobody() -> None:
    close = 0.002 + 0.9 * STRAGGLER_FRACTION * 0.1
    assert _throughput((close, 0.002)).straggler(["rank 0", "rank 1"]) is None


def test_waits_not_measured_name_nobody() -> None:
    assert _throughput((None, None)).straggler(["rank 0", "rank 1"]) is None


@pytest.mark.parametrize("text", ["grad:1", "grad:x:1.01", "slow:1:0", "lost:1:5"])
def test_a_malformed_plant_says_the_form_it_needs(text: str) -> None:
    with pytest.raises(ValueError, match=r"KIND:RANK:AMOUNT"):
        Plant.parse(text)


def test_the_float8_step_on_gloo_ranks_skips_saying_it_needs_a_gpu(tmp_path: Path) -> None:
    plan = dataclasses.replace(CPU_STEPS, jobs=("fsdp-float8",))
    results = _ranks_run(tmp_path, plan)
    reasons = {r["fsdp-float8"].get("skipped") for r in results}
    assert len(reasons) == 1 and str(next(iter(reasons))).startswith(
        "torchao-tensorwise with FP8 all-gather: needs a GPU, found cpu ("
    ), reasons
    with pytest.raises(pytest.skip.Exception, match="needs a GPU, found cpu"):
        StepsRun(plan, cpu_world(2), tuple(results), ()).require("fsdp-float8")


def test_the_float8_step_runs_after_the_bf16_step_at_the_extended_level_only() -> None:
    for library in ("nccl", "gloo"):
        assert "fsdp-float8" not in plan_for(library, "standard").jobs
        extended = plan_for(library, "extended").jobs
        assert extended.index("fsdp") < extended.index("fsdp-float8"), extended


def test_chosen_jobs_survive_the_command_line_and_an_unknown_one_names_the_known() -> None:
    args = parser().parse_args(["--level", "extended", "--jobs", "fsdp,fsdp-float8"])
    plan = plan_from_arguments(args, gpu=True)
    assert plan.jobs == ("fsdp", "fsdp-float8") and (plan.layers, plan.seq_len) == (8, 8192)
    assert plan_from_arguments(parser().parse_args(plan.arguments()), gpu=True) == plan
    with pytest.raises(ValueError, match="unknown fsdp-fp8; known: parity, fsdp, fsdp-float8"):
        plan_from_arguments(parser().parse_args(["--jobs", "fsdp-fp8"]), gpu=True)


def test_every_timed_job_has_a_model_and_a_unit_and_those_the_standard_level_leaves_out_are_extended() -> None:
    assert set(suite.MODELS) == set(suite.UNITS) == set(TIMED_JOBS)
    marked = {p.values[0] for p in suite.JOBS if not isinstance(p, str) and p.marks}
    assert marked == set(TIMED_JOBS) - set(STANDARD_JOBS)


def _timed(group_s: list[float], layers: int = 8) -> dict:
    return {
        "group_s": group_s,
        "solo_s": group_s,
        "work_per_rank": 2 * 8192,
        "flops_per_rank": 1e15,
        "layers": layers,
        "seq_len": 8192,
        "batch": 2,
    }


def test_the_float8_speedup_is_the_ratio_of_the_two_steps_rates_with_their_spreads_combined() -> None:
    rank = {"fsdp": _timed([0.30, 0.32, 0.31, 0.30]), "fsdp-float8": _timed([0.20, 0.22, 0.20, 0.21])}
    gain = speedup("fsdp-float8", "fsdp", [rank, rank])
    assert gain is not None and gain.value == pytest.approx(0.3075 / 0.2075)
    spreads = [throughput(job, [rank, rank]).dispersion for job in ("fsdp", "fsdp-float8")]
    assert gain.dispersion == pytest.approx(math.hypot(*spreads)) and gain.dispersion > 0


@pytest.mark.parametrize(
    "float8",
    [{"skipped": "needs a GPU, found cpu"}, _timed([0.2, 0.2], layers=2), None],
    ids=["skipped", "another-depth", "not-run"],
)
def test_no_float8_speedup_without_both_steps_on_the_same_shape(float8: dict | None) -> None:
    rank = {"fsdp": _timed([0.3, 0.3])} | ({"fsdp-float8": float8} if float8 else {})
    assert speedup("fsdp-float8", "fsdp", [rank, rank]) is None


def test_a_job_left_out_of_the_runs_jobs_skips_naming_the_variable_that_chooses_them() -> None:
    plan = dataclasses.replace(CPU_STEPS, jobs=("fsdp",))
    with pytest.raises(pytest.skip.Exception, match=r"not among this run's jobs \(fsdp; ROCM_VALIDATE_TRAINING_JOBS"):
        StepsRun(plan, cpu_world(2), (None, None), ()).require("fsdp-float8")
