"""Where a node run's work goes (pure): shared tests placed on GPUs, shares of split work, what
each worker keeps, the marker's arguments; and the scheduler's order, with stand-in workers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rocm_validate.node.scheduling import NodeScheduling, process_ended
from rocm_validate.node.work import (
    BESIDE,
    MAIN,
    NODE_WIDE,
    PER_GPU,
    SHARED,
    Share,
    SharedSpec,
    SharedTest,
    assign_shared,
    kept_by,
    shared_spec,
)


def test_shared_tests_go_longest_first_to_the_least_loaded_gpu():
    tests = [SharedTest("a", 10), SharedTest("b", 60), SharedTest("c", 25), SharedTest("d", 30)]
    assert assign_shared(tests, 2) == {"b": 0, "d": 1, "c": 1, "a": 1}


def test_tests_of_one_group_stay_on_one_gpu_and_weigh_together():
    tests = [SharedTest("x", 50), SharedTest("l1", 20, "llama"), SharedTest("l2", 40, "llama"), SharedTest("y", 5)]
    placed = assign_shared(tests, 2)
    assert placed["l1"] == placed["l2"] == 0 and placed["x"] == 1 and placed["y"] == 1


def test_the_placement_does_not_depend_on_anything_but_the_collection():
    tests = [SharedTest(f"t{i}", 1.0 + i % 3) for i in range(20)]
    assert assign_shared(tests, 8) == assign_shared(list(tests), 8)
    assert sorted(set(assign_shared(tests, 8).values())) == list(range(8))


def test_a_node_of_one_gpu_places_everything_on_it_and_of_none_is_an_error():
    assert set(assign_shared([SharedTest("a", 3), SharedTest("b", 1)], 1).values()) == {0}
    with pytest.raises(ValueError, match="at least one GPU"):
        assign_shared([], 0)


def test_shares_cover_every_item_once_and_rotate_the_extra_items():
    seeds = range(10)
    shares = [Share(p, 3).of(seeds, rotation=1) for p in range(3)]
    assert sorted(s for share in shares for s in share) == list(seeds)
    assert [len(share) for share in shares] == [3, 4, 3]
    assert [len(Share(p, 3).of(seeds)) for p in range(3)] == [4, 3, 3]
    assert Share().of(seeds) == tuple(seeds)
    with pytest.raises(ValueError, match=r"share position must lie in \[0, 2\), found 2"):
        Share(2, 2)


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((), {}, SharedSpec()),
        ((), {"seconds": 60, "group": "llama"}, SharedSpec(60.0, "llama")),
        ((), {"split": True}, SharedSpec(split=True)),
    ],
)
def test_the_shared_marker_takes_seconds_group_and_split(args, kwargs, expected):
    assert shared_spec(args, kwargs) == expected


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((60,), {}), ((), {"seconds": 0}), ((), {"seconds": True}), ((), {"group": ""}), ((), {"cost": 3})],
)
def test_a_shared_marker_with_other_arguments_names_the_accepted_forms(args, kwargs):
    with pytest.raises(ValueError, match="rocm_shared takes seconds=<positive number>, group=<name> and split=<bool>"):
        shared_spec(args, kwargs)


@pytest.mark.parametrize(
    ("kind", "suite", "lane", "assigned", "position", "lead", "kept"),
    [
        (PER_GPU, "correctness", MAIN, None, 1, False, True),
        (PER_GPU, "correctness", BESIDE, None, 1, False, False),
        (PER_GPU, "convergence", MAIN, None, 1, False, False),
        (PER_GPU, "convergence", BESIDE, None, 1, False, True),
        (SHARED, "perf", MAIN, 1, 1, False, True),
        (SHARED, "perf", MAIN, 0, 1, False, False),
        (SHARED, "convergence", BESIDE, 0, 0, False, True),
        (NODE_WIDE, "convergence", MAIN, None, 0, True, True),
        (NODE_WIDE, "collectives", MAIN, None, 1, False, False),
        (NODE_WIDE, "convergence", BESIDE, None, 0, False, False),
    ],
)
def test_each_worker_keeps_its_own_work(kind, suite, lane, assigned, position, lead, kept):
    assert kept_by(kind, suite, lane, True, assigned, position, lead) is kept


def test_without_beside_lanes_the_main_worker_keeps_the_convergence_suite():
    assert kept_by(PER_GPU, "convergence", MAIN, False, None, 0, True)


class Worker:
    """A stand-in for xdist's WorkerController: records what it was sent."""

    def __init__(self, gpu: str, lane: str = MAIN) -> None:
        self.gateway = SimpleNamespace(spec=SimpleNamespace(env={"ROCM_VALIDATE_NODE_GPU": gpu, "LANE": lane}))
        self.sent: list[int] = []
        self.down = False
        self.workeroutput = {"pid": None}

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.down = True


COLLECTION = [
    "suites/preflight/test_host.py::test_a",
    "suites/collectives/test_c.py::test_group",
    "suites/correctness/test_x.py::test_numerics",
    "suites/perf/test_p.py::test_timing",
    "suites/preflight/test_host.py::test_last",
]


def _scheduler(workers, config):
    sched = NodeScheduling(
        config,
        None,
        node_wide=lambda nodeid: "collectives" in nodeid,
        timing=lambda nodeid: "/perf/" in nodeid,
        role=lambda w: (w.gateway.spec.env["ROCM_VALIDATE_NODE_GPU"], w.gateway.spec.env["LANE"]),
        lead_gpu="0",
    )
    for worker, _ in workers:
        sched.add_node(worker)
    for worker, collection in workers:
        sched.add_node_collection(worker, collection)
    sched.schedule()
    return sched


def _finish(sched, worker):
    for index in list(sched.node2pending[worker]):
        sched.mark_test_complete(worker, index)


@pytest.fixture
def config():
    """What xdist's scheduler reads of the config: three worker specs."""
    return SimpleNamespace(getvalue=lambda name: ["popen"] * 3)


def test_a_main_worker_times_nothing_until_its_gpus_beside_worker_has_ended(config):
    main0, main1, beside0 = Worker("0"), Worker("1"), Worker("0", BESIDE)
    training = ["suites/convergence/test_t.py::test_share"]
    sched = _scheduler(
        [(main0, COLLECTION), (main1, [c for c in COLLECTION if "collectives" not in c]), (beside0, training)], config
    )
    assert main0.sent == [0, 2] and beside0.sent == [0] and beside0.down
    assert main1.sent == [0, 1, 2, 3] and main1.down  # GPU 1 has no beside worker here: nothing to wait for
    sched.mark_test_complete(main0, 0)
    assert main0.sent == [0, 2]
    _finish(sched, beside0)
    sched.remove_node(beside0)
    assert main0.sent == [0, 2, 3, 4] and not main0.down
    _finish(sched, main1)
    sched.remove_node(main1)
    sched.mark_test_complete(main0, 2)
    sched.mark_test_complete(main0, 3)
    assert main0.sent == [0, 2, 3, 4, 1] and main0.down, "the node-wide test comes last, on the lead"
    sched.mark_test_complete(main0, 4)
    sched.mark_test_complete(main0, 1)
    assert sched.tests_finished


def test_a_finished_process_and_a_zombie_have_ended_a_running_one_has_not(tmp_path):
    (tmp_path / "11").mkdir()
    (tmp_path / "11" / "stat").write_text("11 (python3 (worker)) Z 1 2 3")
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "stat").write_text("12 (python3) S 1 2 3")
    assert process_ended(10, tmp_path) and process_ended(11, tmp_path) and not process_ended(12, tmp_path)
