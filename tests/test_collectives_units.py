"""The collectives suite's pure parts: nccl-tests' bus bandwidth, the bandwidth-dip rule, sizes,
the rank program's plan, every rank's results into one verdict, and the exact payloads."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import torch

from rocm_validate.collectives import payloads
from rocm_validate.collectives.busbw import (
    DIP_MIN_DROP,
    BandwidthPoint,
    bus_factor,
    busbw_gbps,
    find_dips,
)
from rocm_validate.collectives.outcome import group_failure, summarize, suspects
from rocm_validate.collectives.plan import (
    CPU_PLAN,
    GPU_PLAN,
    MAX_CALLS_PER_ROUND,
    Fault,
    cpu_world,
    gpu_world,
    parser,
    plan_for,
    plan_from_arguments,
    world_skip_reason,
)
from rocm_validate.results.sizes import parse_size, size_label


@pytest.mark.parametrize(
    "op, factor",
    [
        ("all_reduce", 2 * 7 / 8),
        ("all_gather", 7 / 8),
        ("reduce_scatter", 7 / 8),
        ("all_to_all", 7 / 8),
        ("broadcast", 1.0),
    ],
)
def test_bus_bandwidth_factors_are_those_of_nccl_tests(op, factor):
    assert bus_factor(op, 8) == pytest.approx(factor)


def test_bus_bandwidth_is_size_over_time_times_the_factor():
    assert busbw_gbps("all_reduce", 8 * 10**9, 0.1, 8) == pytest.approx(80 * 1.75)
    assert bus_factor("all_reduce", 1) == 0.0


def test_an_unknown_collective_has_no_factor():
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        bus_factor("gather", 2)


@pytest.mark.parametrize(
    "text, nbytes", [("4KiB", 4096), ("256MiB", 256 * 2**20), ("1gib", 2**30), ("64M", 64 * 2**20), ("4096", 4096)]
)
def test_sizes_read_and_print_in_binary_units(text, nbytes):
    assert parse_size(text) == nbytes
    assert parse_size(size_label(nbytes)) == nbytes


def test_a_bad_size_says_what_a_size_looks_like():
    with pytest.raises(
        ValueError, match=r"'12 parsecs' is not a size; expected bytes or a number with KiB, MiB or GiB"
    ):
        parse_size("12 parsecs")


def _cvs(smaller, larger):
    return DIP_MIN_DROP, "cvs"


def test_a_drop_of_more_than_five_percent_to_the_next_size_is_a_dip_and_a_smaller_one_is_not():
    points = [
        BandwidthPoint(2**20, 100.0),
        BandwidthPoint(2**24, 200.0),
        BandwidthPoint(2**28, 185.0),
        BandwidthPoint(2**30, 180.0),
    ]
    dips = find_dips(points, _cvs)
    assert [(d.smaller.nbytes, d.larger.nbytes) for d in dips] == [(2**24, 2**28)]
    assert dips[0].message("all_reduce") == (
        "all_reduce: bus bandwidth drops 7.5% from 16MiB (200 GB/s) to 256MiB (185 GB/s), more than the 5.0% allowed (cvs)"
    )


def test_a_wider_band_from_noise_forgives_a_larger_drop():
    points = [BandwidthPoint(4096, 1.0, 0.3), BandwidthPoint(65536, 0.8, 0.3)]
    assert find_dips(points, _cvs) and not find_dips(points, lambda a, b: (0.25, "noise"))


def _args(*words: str) -> argparse.Namespace:
    return parser().parse_args(list(words))


def test_the_rank_program_takes_the_device_plan_and_the_options_given():
    assert plan_from_arguments(_args(), gpu=True) == GPU_PLAN
    plan = plan_from_arguments(_args("--sizes", "4KiB,1MiB", "--iters", "2", "--fault", "broadcast:1:hang"), gpu=False)
    assert plan.sizes == (4096, 2**20) and plan.iters == 2 and plan.rounds == CPU_PLAN.rounds
    assert plan.fault("broadcast", 1) == Fault("broadcast", 1, "hang") and plan.fault("broadcast", 0) is None


def test_a_plan_survives_its_own_command_line():
    plan = plan_from_arguments(_args("--fault", "all_reduce:1:corrupt", "--timeout", "7"), gpu=False)
    assert plan_from_arguments(_args(*plan.arguments()), gpu=True) == plan


@pytest.mark.parametrize(
    "words, message",
    [
        (("--ops", "all_reduce,gather"), "--ops: unknown gather"),
        (("--rounds", "0"), "--rounds=0: expected a whole number"),
        (("--round-s", "-1"), "--round-s=-1.0: expected seconds from 0 to 10"),
        (("--round-s", "nan"), "--round-s=nan: expected seconds"),
        (("--fault", "all_reduce:one:corrupt"), "expected STEP:RANK:KIND"),
        (("--fault", "all_reduce:1:explode"), "KIND one of corrupt, hang, exit"),
    ],
)
def test_a_bad_plan_option_names_itself(words, message):
    with pytest.raises(ValueError, match=message):
        plan_from_arguments(_args(*words), gpu=False)


def test_a_timed_round_holds_enough_calls_to_fill_the_round_time_within_its_bounds():
    plan = dataclasses.replace(GPU_PLAN, iters=10, round_s=0.025)
    assert plan.calls_per_round(0.0005) == 50  # a 256 MiB all_to_all on NVLink: 5 ms a round at 10 calls
    assert plan.calls_per_round(0.01) == 10  # a long call keeps the least number of calls
    assert plan.calls_per_round(1e-7) == MAX_CALLS_PER_ROUND
    assert plan.calls_per_round(0.0) == 10  # no warm-up measured: the plan's calls
    assert dataclasses.replace(plan, round_s=0).calls_per_round(0.0005) == 10


def test_a_world_beyond_one_full_node_copies_smaller_peer_to_peer_buffers():
    assert plan_for("nccl", 8) == GPU_PLAN and plan_for("gloo", 2) == CPU_PLAN
    assert plan_for("nccl", 64).p2p_bytes == 32 * 2**20 and plan_for("nccl", 64).sizes == GPU_PLAN.sizes


def test_one_gpu_is_not_a_group_and_the_skip_says_how_to_select_more():
    reason = world_skip_reason(["GPU 0 (BDF 0000:05:00.0)"], cpu=False)
    assert reason == (
        "needs two or more GPUs for collectives, found 1 (GPU 0 (BDF 0000:05:00.0)); select several with "
        "--rocm-device=all or a list such as --rocm-device=0,1"
    )
    assert world_skip_reason([], cpu=True) is None and world_skip_reason(["a", "b"], cpu=False) is None


def test_rank_r_runs_on_the_r_th_selected_gpu_and_a_failure_blames_its_index():
    world = gpu_world(
        [(2, "GPU 2 (BDF 0000:03:00.0)"), (5, "GPU 5 (BDF 0000:06:00.0)")], {"HIP_VISIBLE_DEVICES": "2,5"}
    )
    assert world.gpus == (2, 5) and world.labels[1] == "rank 1 on GPU 5 (BDF 0000:06:00.0)"
    assert world.gpus_of([1]) == (5,) and world.gpus_of([1, 0, 1]) == (2, 5)
    assert cpu_world(2).gpus_of([1]) == (), "gloo ranks on the CPU run on no GPU to blame"


def _rank(rank: int, seconds: list[float], mismatch: str | None = None, error: str | None = None) -> dict:
    return {
        "rank": rank,
        "steps": [{"op": "all_reduce", "bytes": 4096, "mismatch": mismatch, "seconds": seconds}],
        "p2p": [{"src": 0, "dst": 1, "bytes": 64, "mismatch": None, "seconds": [seconds[0] * 2]}],
        "error": error,
        "at": "broadcast 4KiB" if error else None,
    }


def test_a_steps_time_is_the_mean_over_ranks_per_round_and_its_noise_the_spread_of_rounds():
    outcome = summarize([_rank(0, [1e-3, 2e-3, 3e-3]), _rank(1, [3e-3, 2e-3, 1e-3])], ["rank 0", "rank 1"], "gloo")
    step = outcome.steps_of("all_reduce")[0]
    assert step.seconds == (2e-3, 2e-3, 2e-3) and step.dispersion == 0.0
    assert step.busbw == pytest.approx(4096 / 2e-3 / 1e9) and outcome.passed
    assert outcome.pairs[0].seconds == (6e-3,)  # the slower side of the copy


def test_a_wrong_result_names_its_rank_and_fails_the_run():
    outcome = summarize(
        [_rank(0, [1e-3]), _rank(1, [1e-3], mismatch="3 / 1024 elements differ")], ["rank 0", "rank 1 on GPU 3"], "nccl"
    )
    assert outcome.data_failures("all_reduce") == ["all_reduce 4KiB: rank 1 on GPU 3: 3 / 1024 elements differ"]
    assert outcome.wrong_ranks("all_reduce") == (1,) and not outcome.passed


def test_failing_pairs_point_at_the_rank_in_every_one_of_them_else_at_every_rank_in_them():
    assert suspects([(0, 5), (5, 2), (3, 5)]) == (5,)
    assert suspects([(0, 1)]) == (0, 1)
    assert suspects([(0, 1), (2, 3)]) == (0, 1, 2, 3), "two unrelated slow pairs: no one GPU explains them"
    assert suspects([]) == ()


def test_a_rank_with_no_result_is_named_before_the_ranks_it_stopped():
    outcome = summarize(
        [_rank(0, [1e-3], error="RuntimeError: timed out"), None],
        ["rank 0", "rank 1"],
        "gloo",
        {1: "hung in broadcast 4KiB: still running after the other ranks gave up waiting"},
    )
    assert outcome.problems == (
        "rank 1: hung in broadcast 4KiB: still running after the other ranks gave up waiting",
        "rank 0: stopped at broadcast 4KiB: RuntimeError: timed out",
    )
    assert outcome.incomplete("all_reduce", 1).startswith("all_reduce was not measured on every rank: rank 1: hung")
    assert outcome.pairs[0].missing and not outcome.passed


def test_the_expected_results_are_what_the_collectives_compute_from_every_ranks_payload():
    world, count = 3, 12
    sent = [payloads.pattern(r, count, "cpu") for r in range(world)]
    chunk = count // world
    assert torch.equal(payloads.expected("all_reduce", 1, world, count, "cpu"), sum(sent))
    assert torch.equal(payloads.expected("broadcast", 2, world, count, "cpu"), sent[0])
    gathered = torch.cat([payloads.pattern(r, chunk, "cpu") for r in range(world)])
    assert torch.equal(payloads.expected("all_gather", 0, world, count, "cpu"), gathered)
    assert torch.equal(payloads.expected("reduce_scatter", 2, world, count, "cpu"), sum(sent)[2 * chunk :])
    exchanged = torch.cat([s[1 * chunk : 2 * chunk] for s in sent])
    assert torch.equal(payloads.expected("all_to_all", 1, world, count, "cpu"), exchanged)


def test_payloads_stay_exact_integers_in_float32_for_a_64_partition_node():
    total = sum(payloads.pattern(r, 4096, "cpu").double() for r in range(64))
    assert torch.equal(total, total.float().double()) and float(total.max()) < 2**24


def test_a_mismatch_reports_count_first_index_and_greatest_difference():
    want = torch.arange(8, dtype=torch.float32)
    found = want.clone()
    found[[2, 5]] += torch.tensor([1.0, 3.0])
    assert payloads.mismatch(found, want) == (
        "2 / 8 elements differ (25.0%); first at index 2: expected 2, found 3; greatest difference 3"
    )
    assert payloads.mismatch(want.clone(), want) is None
    assert payloads.mismatch(want[:4], want) == "shape (4,), expected (8,)"


def test_the_element_count_is_a_multiple_of_the_world():
    assert payloads.element_count(4096, 3) == 1023 and payloads.element_count(4, 8) == 8


@pytest.mark.parametrize(
    ("problems", "category"),
    [
        (["rank 1 on the CPU: could not join the group (exit status 2) in startup: ..."], "configuration"),
        (
            [
                "rank 1 on the CPU: hung in startup: still running after the other ranks gave up waiting",
                "rank 0 on the CPU: could not join the group (exit status 2) in startup: ...",
            ],
            "configuration",
        ),
        (
            ["rank 1 on the CPU: hung in all_reduce 4KiB: still running after the other ranks gave up waiting"],
            "timeout",
        ),
        (
            [
                "rank 1 on the CPU: died with signal 11 (SIGSEGV) in startup",
                "rank 0 on the CPU: could not join the group (exit status 2) in startup: ...",
            ],
            "crash",
        ),
    ],
    ids=["a-rank-could-not-join", "the-group-never-formed", "a-rank-hung-in-a-collective", "a-rank-died-at-startup"],
)
def test_a_group_that_did_not_complete_is_a_rendezvous_problem_only_when_it_never_formed(
    problems: list[str], category: str
) -> None:
    found, fix = group_failure(problems)
    assert found == category and (fix is not None) == (category == "configuration")
