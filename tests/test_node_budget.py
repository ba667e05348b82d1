"""A node run's time (pure): the model its budget and the 8-GPU projection come from, the budgets
per level and node size, and where a run's time went."""

from __future__ import annotations

import pytest

from rocm_validate.core.options import SUITES
from rocm_validate.node.budget import BUDGETS, CollectivesCost, SuiteWork, collectives_on_gpus, measured_work, node_time
from rocm_validate.results.time_used import WorkSpan, lane_spans, time_table, time_used

WORK = {
    "correctness": SuiteWork(per_gpu_s=100, shared_s=60, largest_shared_s=26),
    "perf": SuiteWork(per_gpu_s=90, shared_s=85, largest_shared_s=60, timed=True),
    "convergence": SuiteWork(per_gpu_s=15, shared_s=185, node_s=5, beside=True),
}


def test_one_gpu_runs_everything_in_turn():
    one = node_time(WORK, 1, startup_s=10)
    assert one.total_s == 10 + 100 + 60 + 90 + 85 + 15 + 185 + 5


def test_shared_work_divides_among_the_gpus_but_never_below_its_longest_test():
    two, eight = node_time(WORK, 2, 10), node_time(WORK, 8, 10)
    assert two.main_s == 100 + 90 + (60 + 85) / 2
    assert eight.main_s == 100 + 90 + 60, "the 60 s test stays whole on one GPU"


def test_the_beside_lane_adds_only_what_exceeds_the_untimed_work_per_gpu_and_shared():
    two = node_time(WORK, 2, 10)
    assert (two.untimed_s, two.beside_s) == (100 + 30, 15 + 92.5), "the untimed shared tests run before timings too"
    assert two.total_s == 10 + two.main_s + 5
    longer = node_time({**WORK, "convergence": SuiteWork(per_gpu_s=15, shared_s=265, node_s=5, beside=True)}, 2, 10)
    assert longer.total_s == 10 + longer.main_s + (15 + 132.5 - 130) + 5
    assert node_time(WORK, 4, 10).total_s == 10 + node_time(WORK, 4, 10).main_s + 5
    assert node_time(WORK, 2, 10, lanes=False).total_s == 10 + 100 + 90 + 72.5 + 15 + 92.5 + 5


def test_the_collectives_grow_with_the_ranks_the_bus_factor_and_the_pairs():
    cost = CollectivesCost(fixed_s=6, per_rank_s=2, collectives_s=4, per_pair_s=1)
    assert cost.seconds(1) == 0
    assert cost.seconds(2) == 6 + 4 + 4 + 1
    assert cost.seconds(8) == pytest.approx(6 + 16 + 4 * 1.75 + 28)


def test_the_standard_budget_is_within_five_minutes_on_two_gpus_with_the_training_steps_and_within_ten_on_eight():
    standard = BUDGETS["standard"]
    # The training steps' 25 s node-wide; the compiled perf steps (a cold compile each) are extended.
    assert standard.seconds(2, SUITES) == 290
    assert standard.seconds(8, SUITES) <= 600
    assert standard.seconds(2, {"correctness"}) < standard.seconds(2, {"correctness", "perf"})
    assert BUDGETS["quick"].seconds(2, SUITES) < standard.seconds(2, SUITES) < BUDGETS["extended"].seconds(2, SUITES)


def test_the_time_table_shows_each_suites_work_per_gpu_beside_lanes_and_the_node():
    used = time_used(
        300.0,
        [
            ("correctness", "per-gpu", 0, 90.0),
            ("correctness", "per-gpu", 1, 92.0),
            ("correctness", "shared", 0, 30.0),
            ("convergence", "shared", 0, 95.0),
            ("convergence", "shared", 1, 97.0),
            ("collectives", "node-wide", None, 15.0),
            (None, None, None, 1.0),
        ],
        beside_suites=("convergence",),
    )
    assert used.serial_s(0) == 120 and used.serial_s(1) == 92 and used.node_s() == 15
    assert time_table(used) == [
        "suite                 work             GPU 0  GPU 1  node",
        "collectives           node wide        -      -      15 s",
        "convergence           shared (beside)  95 s   97 s   -",
        "correctness           per gpu          90 s   92 s   -",
        "correctness           shared           30 s   -      -",
        "main worker, in turn                   120 s  92 s   15 s",
    ]
    assert used.to_dict()["serial_s"] == {"0": 120.0, "1": 92.0}


def test_a_measured_run_gives_each_suites_work_for_the_projection():
    used = time_used(
        300.0,
        [
            ("correctness", "per-gpu", 0, 90.0),
            ("correctness", "per-gpu", 1, 95.0),
            ("correctness", "shared", 0, 30.0),
            ("correctness", "shared", 1, 28.0),
            ("perf", "per-gpu", 0, 80.0),
            ("convergence", "shared", 0, 100.0),
            ("convergence", "shared", 1, 96.0),
            ("convergence", "node-wide", None, 4.0),
            ("collectives", "node-wide", None, 15.0),
        ],
        beside_suites=("convergence",),
    )
    work = measured_work(used.rows, {"correctness": 26.0})
    assert work["correctness"] == SuiteWork(per_gpu_s=95, shared_s=58, largest_shared_s=26)
    assert work["perf"].timed and work["perf"].per_gpu_s == 80
    assert work["convergence"] == SuiteWork(shared_s=196, node_s=4, beside=True)
    assert work["collectives"] == SuiteWork()


def test_the_collectives_on_gpus_keep_the_measured_two_gpu_time_and_grow_by_the_cpus_terms():
    cost = collectives_on_gpus(15.0, 1.3, {"fixed_s": 0.2, "per_rank_s": 1.9, "per_pair_s": 0.1}, pair_copies_s=0.05)
    assert cost.seconds(2) == pytest.approx(15.0)
    assert cost.seconds(8) == pytest.approx(15.0 + 6 * 1.9 + 1.3 * 0.75 + 27 * 0.15)


def test_lane_spans_place_each_worker_and_find_the_main_workers_wait_before_its_timings():
    spans = [
        WorkSpan("correctness", 0, 110.0, 150.0),
        WorkSpan("correctness", 0, 180.0, 181.0),  # held until the beside lane ended at 179 s
        WorkSpan("perf", 0, 181.0, 280.0),
        WorkSpan("convergence", 0, 112.0, 179.0),
        WorkSpan("collectives", None, 281.0, 288.0),
    ]
    main, beside, node = lane_spans(spans, 100.0, beside_suites=("convergence",), timed_suites=("perf",))
    assert (main.gpu, main.lane, main.first_s, main.last_s, main.busy_s) == (0, "main", 10.0, 180.0, 140.0)
    assert main.waited_s == 30.0 and main.idle_s == 30.0
    assert (beside.lane, beside.first_s, beside.last_s, beside.waited_s) == ("beside", 12.0, 79.0, None)
    assert (node.gpu, node.lane, node.busy_s) == (None, "node", 7.0)


def test_a_main_worker_without_timed_tests_has_no_wait():
    (main,) = lane_spans([WorkSpan("correctness", 1, 5.0, 9.0)], 0.0, timed_suites=("perf",))
    assert main.waited_s is None and main.idle_s == 0.0
