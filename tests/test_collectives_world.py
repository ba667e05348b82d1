"""The collectives suite on the CPU, as CI runs it: gloo ranks on this host, the real suite, and
its negative controls: a wrong all_reduce on one rank, a rank that hangs, a rank that dies, a
rendezvous nobody answers, and one GPU where a group needs two."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import fake_devices
import pytest

from rocm_validate.collectives.launch import launch
from rocm_validate.collectives.plan import CPU_PLAN, Fault, cpu_world

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "collectives" / "test_collectives.py"
QUICK = dataclasses.replace(CPU_PLAN, sizes=(4096, 65536), warmup=0, iters=2, rounds=2, timeout_s=3)


def test_the_suite_passes_at_world_size_2_over_gloo_and_records_bus_bandwidth(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        str(SUITE),
        f"--rootdir={REPO}",
        "--rocm-suite=collectives",
        "--rocm-device=cpu",
        f"--rocm-baselines={pytester.mkdir('baselines')}",
        f"--rocm-report={pytester.path / 'report.json'}",
        "-p",
        "no:cacheprovider",
        "-rs",
    )
    outcomes = result.parseoutcomes()
    assert result.ret == 0 and outcomes.get("failed", 0) == 0, result.stdout.str()[-3000:]
    assert outcomes["passed"] == 23 and outcomes["skipped"] == 12, outcomes  # no baselines yet: gated tests skip
    result.stdout.fnmatch_lines(
        [
            "*no baseline for collective.all_reduce.2ranks.4kib, *; run pytest --rocm-suite=collectives "
            "--rocm-device=cpu --rocm-baselines=* --update-baselines"
        ]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    names = {m["name"] for m in report["metrics"]}
    assert {"collective.all_reduce.2ranks.1mib", "collective.all_to_all.2ranks.4kib", "p2p.rank0-rank1.64kib"} <= names
    busbw = next(m for m in report["metrics"] if m["name"] == "collective.all_reduce.2ranks.1mib")
    assert busbw["unit"] == "GB/s" and busbw["value"] > 0 and busbw["extra"]["collective"] == "all_reduce"
    bf16 = next(m for m in report["metrics"] if m["name"] == "collective.reduce_scatter_bf16.2ranks.64kib")
    assert bf16["extra"]["dtype"] == "bfloat16" and 0 < bf16["extra"]["error_ratio"] <= 1
    assert "collective.all_gather_fp8e5m2.2ranks.4kib" in names


PLANTED = """
import dataclasses

import pytest

from rocm_validate.collectives.plan import Fault


@pytest.fixture(scope="session")
def collective_plan(collective_plan):
    return dataclasses.replace(collective_plan, faults=(Fault("all_reduce", 1, "corrupt"),))
"""


def test_a_planted_wrong_all_reduce_on_one_rank_fails_naming_that_rank(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("suites")
    (folder / "collectives").mkdir()
    (folder / "collectives" / "test_collectives.py").write_text(SUITE.read_text())
    (folder / "collectives" / "conftest.py").write_text(PLANTED)
    result = pytester.runpytest(
        "suites/collectives", "--rocm-device=cpu", "-k", "expected_result", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*all_reduce gave the wrong result:",
            "*all_reduce 4KiB: rank 1 on the CPU: 147 / 1024 elements differ (14.4%); first at index 0: expected 15, found 16*",
        ]
    )
    assert "rank 0 on the CPU:" not in result.stdout.str()


def test_a_rank_that_drops_its_bf16_gradient_from_the_reduction_is_named(tmp_path: Path) -> None:
    plan = dataclasses.replace(
        QUICK,
        ops=("reduce_scatter_bf16",),
        training_sizes=(4096,),
        faults=(Fault("reduce_scatter_bf16", 1, "corrupt"),),
    )
    outcome = launch(plan, cpu_world(2), os.environ, tmp_path)
    [failure] = outcome.data_failures("reduce_scatter_bf16")
    assert failure.startswith(
        "reduce_scatter_bf16 4KiB: rank 1 on the CPU: 147 / 1024 elements beyond the bfloat16 reduction's error bound"
    )
    assert not outcome.passed and outcome.steps_of("reduce_scatter_bf16")[0].error_ratio > 1


def _ranks_left() -> list[int]:
    """Rank processes still alive (or unreaped) that this process started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == str(os.getpid()) and "rocm_validate.collectives" in command:
            found.append(int(entry.name))
    return found


def test_a_rank_that_hangs_is_named_within_the_timeout_and_the_group_is_ended(tmp_path: Path) -> None:
    plan = dataclasses.replace(QUICK, ops=("all_reduce",), faults=(Fault("all_reduce", 1, "hang"),))
    start = time.monotonic()
    outcome = launch(plan, cpu_world(2), os.environ, tmp_path)
    assert time.monotonic() - start < 60
    assert outcome.problems[0] == (
        "rank 1 on the CPU: hung in all_reduce 4KiB: still running after the other ranks gave up waiting; stopped by the launcher"
    )
    assert outcome.problems[1].startswith("rank 0 on the CPU: stopped at all_reduce 4KiB:")
    assert not outcome.passed and _ranks_left() == []


def test_a_rank_that_dies_ends_the_group_and_is_named_first(tmp_path: Path) -> None:
    plan = dataclasses.replace(QUICK, ops=("broadcast",), faults=(Fault("broadcast", 1, "exit"),))
    outcome = launch(plan, cpu_world(3), os.environ, tmp_path)
    assert outcome.problems[0].startswith(
        "rank 1 on the CPU: died with exit status 17 in broadcast 4092B"
    )  # 1023 floats: 3 equal chunks
    assert len(outcome.problems) == 3 and "incomplete" not in outcome.problems[0]
    assert outcome.incomplete("broadcast", 2).startswith(
        "broadcast was not measured on every rank: rank 1 on the CPU: died"
    )


def test_rounds_filled_to_a_round_time_make_the_same_calls_on_every_rank(tmp_path: Path) -> None:
    """The calls per round each rank's warm-up asks for are agreed (the world's, and each pair's),
    so no rank waits on a call its peer never makes."""
    plan = dataclasses.replace(QUICK, ops=("all_reduce", "all_to_all"), warmup=2, round_s=0.01)
    outcome = launch(plan, cpu_world(3), os.environ, tmp_path)
    assert outcome.passed, outcome.problems
    assert len(outcome.pairs) == 3 and all(len(p.seconds) == QUICK.rounds for p in outcome.pairs)
    assert all(len(s.seconds) == QUICK.rounds for op in plan.ops for s in outcome.steps_of(op))


def test_a_wrong_peer_to_peer_copy_names_the_pair(tmp_path: Path) -> None:
    plan = dataclasses.replace(QUICK, ops=("broadcast",), sizes=(4096,), faults=(Fault("p2p", 1, "corrupt"),))
    outcome = launch(plan, cpu_world(2), os.environ, tmp_path)
    assert [(p.src, p.dst, (p.mismatch or "").split(";")[0]) for p in outcome.pairs] == [
        (0, 1, "2341 / 16384 elements differ (14.3%)")
    ]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_rendezvous_is_a_clear_error_within_the_timeout_not_a_hang() -> None:
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_closed_port())}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rocm_validate.collectives", "--timeout", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and time.monotonic() - start < 60
    assert f"rank 1 of 2 could not join the rendezvous at 127.0.0.1:{env['MASTER_PORT']} within 2 s" in done.stderr
    assert "Check MASTER_ADDR / MASTER_PORT (torchrun: --rdzv-endpoint)" in done.stderr


def test_the_rank_program_started_without_a_launcher_says_how_to_start_it() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    done = subprocess.run(
        [sys.executable, "-m", "rocm_validate.collectives"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set: start the ranks with torchrun" in done.stderr
    assert "-m rocm_validate.collectives)" in done.stderr


def test_the_training_steps_started_without_a_launcher_name_their_own_program() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    done = subprocess.run(
        [sys.executable, "-m", "rocm_validate.collectives.training"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "torchrun --nproc-per-node N -m rocm_validate.collectives.training)" in done.stderr


def test_one_gpu_skips_the_suite_with_the_need_and_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.mi300x()))
    suites = pytester.mkdir("suites")
    (suites / "collectives").mkdir()
    (suites / "collectives" / "test_collectives.py").write_text(SUITE.read_text())
    result = pytester.runpytest("--rocm-suite=collectives", "--rocm-device=0", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=35)
    result.stdout.fnmatch_lines(
        [
            "*35 skipped: needs two or more GPUs for collectives, found 1 (GPU 0 (BDF *)); "
            "select several with --rocm-device=all or a list such as --rocm-device=0,1*"
        ]
    )


@pytest.mark.parametrize("value", ["1", "x", "17"])
def test_a_cpu_world_needs_two_to_sixteen_ranks(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest(f"--rocm-cpu-ranks={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --rocm-cpu-ranks='{value}': expected a whole number of ranks from 2 to 16*"])
