"""The node's training steps on the CPU, as CI runs them: the N-rank vs one-rank parity check at
world size 2 over gloo (fp32 within the error model, bf16 within its measured tolerance), run as
two torchrun "nodes" on this machine (rank 0 writes the report), a rank planted to contribute a
wrong gradient named, and the verdicts' own rules (the straggler, the plants) with their negative
controls."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from torchrun_nodes import two_nodes

from rocm_validate.collectives.launch import run_ranks
from rocm_validate.collectives.plan import cpu_world
from rocm_validate.collectives.steps import (
    CPU_STEPS,
    STRAGGLER_FRACTION,
    Plant,
    Throughput,
    fp32_bound,
    parity,
)

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


def _parity_run(tmp_path: Path, *plants: Plant) -> list[dict]:
    plan = dataclasses.replace(PARITY_ONLY, plants=plants)
    world = cpu_world(2)
    results, notes = run_ranks(
        "rocm_validate.collectives.training", plan.arguments(), plan.timeout_s, world, os.environ, tmp_path, "training/"
    )
    assert not notes and all(r and not r["error"] for r in results), (notes, results)
    return [r for r in results if r]


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
