"""How long a whole-node run should take, and where its time went (pure, torch-free).

The GPUs run side by side, so a node run takes as long as its busiest GPU, plus what runs once:

    startup + main worker + max(0, beside lane - untimed per-GPU work) + node-wide work

* **main worker**: a GPU's per-GPU tests (preflight, correctness, then perf) and its share of the
  shared (stack-level) tests of every suite outside the beside lane: their total over the GPUs
  (the shared tests are placed longest first onto the least-loaded GPU), never less than the
  longest shared test, which does not divide;
* **beside lane**: the convergence suite's share of the seeds, and what every GPU pays once
  (compiling its torch.compile candidate); it overlaps the GPU's untimed per-GPU work and must
  end before the GPU's timed work starts, so only what exceeds that work adds;
* **node-wide**: once, at the end: the collectives (their launch, the collectives at every size
  and the n(n-1)/2 peer-to-peer pairs) and the pooled convergence verdicts.

`BUDGETS` states each level's allowance per suite on a GPU (the H100's measured times, rounded
up: docs/node.md "Time"), so a level's budget for a node follows from the node's size and the
suites selected; `node_time` with measured per-suite times instead of allowances is the model the
8-GPU projection uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class SuiteWork:
    """One suite's work, in seconds on one GPU."""

    per_gpu_s: float = 0.0  # every GPU runs it
    shared_s: float = 0.0  # stack-level: the GPUs share it
    largest_shared_s: float = 0.0  # the longest shared test: a GPU's share is never below it
    node_s: float = 0.0  # node-wide, once, at the end (besides the collectives)
    timed: bool = False  # alone on its GPU, after the beside lane
    beside: bool = False  # in the beside lane of a node run

    def share(self, gpus: int) -> float:
        """One GPU's part of the shared work."""
        if not self.shared_s:
            return 0.0
        return max(self.shared_s / gpus, min(self.largest_shared_s, self.shared_s))

    def on_one_gpu(self, gpus: int) -> float:
        return self.per_gpu_s + self.share(gpus)


@dataclass(frozen=True)
class CollectivesCost:
    """The collectives suite's time on n GPUs: a fixed part (launch, rendezvous, the
    communicator), the collectives at every size (their time per byte grows as the bus factor
    2(n-1)/n of a ring all_reduce at constant bus bandwidth), and one copy per pair."""

    fixed_s: float
    per_rank_s: float  # starting each rank's process and joining it to the group, beyond the fixed part
    collectives_s: float  # the collectives at every size at 2 ranks
    per_pair_s: float  # one peer-to-peer pair, checked and timed

    def seconds(self, gpus: int) -> float:
        if gpus < 2:
            return 0.0
        pairs = gpus * (gpus - 1) / 2
        bus_factor = 2 * (gpus - 1) / gpus  # 1 at 2 ranks
        return self.fixed_s + self.per_rank_s * gpus + self.collectives_s * bus_factor + self.per_pair_s * pairs


@dataclass(frozen=True)
class NodeTime:
    """A node run's modelled time, by term."""

    gpus: int
    startup_s: float
    main_s: float  # the busiest GPU's main worker: per-GPU tests and its share of the shared ones
    untimed_s: float  # of which its untimed tests (per-GPU and its share of the shared), which the beside lane overlaps
    beside_s: float
    node_s: float
    lanes: bool

    @property
    def total_s(self) -> float:
        return self.startup_s + self.main_s + max(0.0, self.beside_s - self.untimed_s) + self.node_s

    def terms(self) -> dict[str, float]:
        return {
            "startup_s": self.startup_s,
            "main_s": self.main_s,
            "untimed_s": self.untimed_s,
            "beside_s": self.beside_s,
            "node_s": self.node_s,
            "total_s": self.total_s,
        }


def node_time(
    work: Mapping[str, SuiteWork],
    gpus: int,
    startup_s: float,
    collectives: CollectivesCost | None = None,
    lanes: bool | None = None,
) -> NodeTime:
    """The modelled time of a run of `work` (by suite) on `gpus` GPUs; beside work overlaps the
    untimed work only with lanes (a node of two or more GPUs, by default)."""
    if gpus < 1:
        raise ValueError(f"a node has at least one GPU, found {gpus}")
    lanes = gpus >= 2 if lanes is None else lanes
    main = [w for w in work.values() if not (w.beside and lanes)]
    beside = [w for w in work.values() if w.beside and lanes]
    shared = SuiteWork(
        shared_s=math.fsum(w.shared_s for w in main),
        largest_shared_s=max((w.largest_shared_s for w in main), default=0),
    )
    main_s = math.fsum(w.per_gpu_s for w in main) + shared.share(gpus)
    untimed_shared = SuiteWork(  # a main worker runs its share of the untimed shared tests before its timings too
        shared_s=math.fsum(w.shared_s for w in main if not w.timed),
        largest_shared_s=max((w.largest_shared_s for w in main if not w.timed), default=0),
    )
    untimed = math.fsum(w.per_gpu_s for w in main if not w.timed) + untimed_shared.share(gpus)
    node = math.fsum(w.node_s for w in work.values()) + (collectives.seconds(gpus) if collectives else 0.0)
    return NodeTime(gpus, startup_s, main_s, untimed, math.fsum(w.on_one_gpu(gpus) for w in beside), node, lanes)


@dataclass(frozen=True)
class LevelBudget:
    """A level's allowances on a GPU, per suite, for node runs; one-device runs keep the level's
    stated one-device budget (core/levels.py)."""

    startup_s: float
    suites: Mapping[str, SuiteWork]
    collectives: CollectivesCost
    one_device_s: float = 0.0  # the level's stated budget on one GPU
    lanes: bool = True  # beside lanes at this level (not at extended: node/workers.py beside_lanes)

    def for_node(self, gpus: int, suites: Iterable[str]) -> NodeTime:
        chosen = {name: work for name, work in self.suites.items() if name in set(suites)}
        collectives = self.collectives if "collectives" in chosen else None
        return node_time(chosen, gpus, self.startup_s, collectives, lanes=self.lanes and gpus >= 2)

    def seconds(self, gpus: int, suites: Iterable[str]) -> float:
        """The budget: the modelled time of the run with the allowances, rounded up to 10 s."""
        return math.ceil(self.for_node(gpus, suites).total_s / 10) * 10


# The standard level on a GPU, from the H100 (docs/node.md "Time"): correctness 160 s on one
# GPU (the eager checks ~100 s, compiled and fuzzed checks the rest, the longest 26 s); perf
# 175 s per GPU in the 2 x H100 run (the compiled BERT-L step 60 s of it); the mini-BERT 200 s
# per GPU (every candidate's seeds, plus ~15 s compiling its torch.compile candidate on each
# GPU); the collectives 15 s on 2 x H100. The tests' durations of the 2 x H100 run summed to
# its wall time within seconds (starting the workers is inside the first tests' setup), so 10 s
# covers what lies outside them (discovery, collection, the report).
_STANDARD = {
    "preflight": SuiteWork(per_gpu_s=5),
    "correctness": SuiteWork(per_gpu_s=100, shared_s=60, largest_shared_s=26),
    "perf": SuiteWork(per_gpu_s=90, shared_s=85, largest_shared_s=60, timed=True),
    "convergence": SuiteWork(per_gpu_s=15, shared_s=185, largest_shared_s=5, node_s=5, beside=True),
    "collectives": SuiteWork(node_s=25),  # the training steps (test_training.py), node-wide, once
}
# The training steps: 28.9 s on 2 x H200 with the parity check, the sharded Llama step and DDP BERT-L
# (docs/measurements/training-steps-2xh200-2026-11-28); DDP BERT-L went to the extended level after.
# The collectives: 15 s on 2 x H100; per rank and per pair as gloo measured them on the CPU (an upper bound for a
# host with a core per rank), a pair at 0.5 s: the check, the barrier and 56 copies of 256 MiB at
# MI300X-class link speed (docs/measurements/collectives-scaling-cpu.json, docs/node.md "Time").
STANDARD_COLLECTIVES = CollectivesCost(fixed_s=8.5, per_rank_s=2.0, collectives_s=2.0, per_pair_s=0.5)


def _scaled(work: Mapping[str, SuiteWork], factor: float) -> dict[str, SuiteWork]:
    """Allowances `factor` times as long (the extended level's longer windows)."""
    return {
        name: replace(w, per_gpu_s=w.per_gpu_s * factor, shared_s=w.shared_s * factor, node_s=w.node_s * factor)
        for name, w in work.items()
    }


NODE_BUDGETS: dict[str, LevelBudget] = {
    "quick": LevelBudget(
        startup_s=10,
        suites={
            "preflight": SuiteWork(per_gpu_s=5),
            "correctness": SuiteWork(per_gpu_s=10),
            "perf": SuiteWork(per_gpu_s=10, timed=True),
            "convergence": SuiteWork(per_gpu_s=5, shared_s=25, largest_shared_s=5, node_s=2, beside=True),
            "collectives": SuiteWork(),
        },
        collectives=STANDARD_COLLECTIVES,
        one_device_s=60,
    ),
    "standard": LevelBudget(startup_s=10, suites=_STANDARD, collectives=STANDARD_COLLECTIVES, one_device_s=600),
    "extended": LevelBudget(
        startup_s=10,
        suites={**_scaled(_STANDARD, 4.0), "correctness": SuiteWork(per_gpu_s=400, shared_s=60, largest_shared_s=26)},
        collectives=STANDARD_COLLECTIVES,
        one_device_s=2400,
        lanes=False,
    ),
}


def collectives_on_gpus(
    measured_s: float, timed_s: float, rest_fit: Mapping[str, float], pair_copies_s: float
) -> CollectivesCost:
    """The collectives' cost on GPUs from one measured run on 2 GPUs (`measured_s` in all,
    `timed_s` of it the collectives' own calls) and the per-rank and per-pair terms gloo showed
    on the CPU (`rest_fit`), a pair adding `pair_copies_s` of copying on the GPUs' link; the
    fixed part is what the 2-GPU run leaves."""
    per_rank, per_pair = rest_fit["per_rank_s"], rest_fit["per_pair_s"] + pair_copies_s
    fixed = measured_s - timed_s - 2 * per_rank - per_pair
    return CollectivesCost(fixed_s=max(fixed, 0.0), per_rank_s=per_rank, collectives_s=timed_s, per_pair_s=per_pair)


def measured_work(
    rows: Iterable[TimeRow], largest_shared_s: Mapping[str, float], timed_suites: Iterable[str] = ("perf",)
) -> dict[str, SuiteWork]:
    """Each suite's work as a node run measured it: per-GPU work on the slowest GPU, shared work
    summed over the GPUs, the beside lane's work summed over the GPUs (it splits the same way),
    node-wide work besides the collectives (their own cost is modelled apart)."""
    rows = list(rows)
    timed = set(timed_suites)
    work: dict[str, SuiteWork] = {}
    for suite in sorted({r.suite for r in rows}):
        mine = [r for r in rows if r.suite == suite]
        beside = [r for r in mine if r.beside]
        per_gpu = max(
            (r.seconds for r in mine if r.work == "per-gpu" and r.gpu is not None and not r.beside), default=0.0
        )
        shared = math.fsum(r.seconds for r in mine if r.work == "shared" and r.gpu is not None and not r.beside)
        node = math.fsum(r.seconds for r in mine if r.gpu is None) if suite != "collectives" else 0.0
        work[suite] = SuiteWork(
            per_gpu_s=per_gpu,
            shared_s=shared + math.fsum(r.seconds for r in beside),
            largest_shared_s=largest_shared_s.get(suite, 0.0),
            node_s=node,
            timed=suite in timed,
            beside=bool(beside),
        )
    return work


@dataclass(frozen=True)
class TimeRow:
    """Where some of a run's time went: a suite's work of one kind, on one GPU or the node."""

    suite: str
    work: str  # 'per-gpu', 'shared' or 'node-wide'
    gpu: int | None  # None: the node (node-wide work) or a one-device run
    seconds: float
    tests: int
    beside: bool = False  # in the beside lane: overlapped with the GPU's other work

    def to_dict(self) -> dict[str, object]:
        return {
            "suite": self.suite,
            "work": self.work,
            "gpu": self.gpu,
            "seconds": round(self.seconds, 3),
            "tests": self.tests,
            "beside": self.beside,
        }


@dataclass(frozen=True)
class LaneSpan:
    """When one worker's tests ran, in seconds from the start of the run: a GPU's main worker or
    beside lane, or the node-wide tests (gpu None). `idle_s` is the time between its first test's
    start and its last test's end that no test of it took (waiting, and pytest between tests);
    for a main worker, `waited_s` is its longest gap before its first timed test (the wait for the
    GPU's beside lane to end)."""

    gpu: int | None
    lane: str  # 'main', 'beside' or 'node'
    first_s: float
    last_s: float
    busy_s: float
    waited_s: float | None = None

    @property
    def idle_s(self) -> float:
        return max(0.0, self.last_s - self.first_s - self.busy_s)

    def to_dict(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "lane": self.lane,
            "first_s": round(self.first_s, 3),
            "last_s": round(self.last_s, 3),
            "busy_s": round(self.busy_s, 3),
            "idle_s": round(self.idle_s, 3),
            "waited_s": None if self.waited_s is None else round(self.waited_s, 3),
        }


@dataclass(frozen=True)
class WorkSpan:
    """One test's place in the run: suite, GPU (None: node-wide), start and end (epoch seconds)."""

    suite: str | None
    gpu: int | None
    start: float
    stop: float


def lane_spans(
    spans: Iterable[WorkSpan], started_at: float, beside_suites: Iterable[str] = (), timed_suites: Iterable[str] = ()
) -> tuple[LaneSpan, ...]:
    """Each worker's span from its tests' start and end times (`started_at`: the run's start, epoch)."""
    beside, timed = set(beside_suites), set(timed_suites)
    lanes: dict[tuple[int | None, str], list[WorkSpan]] = {}
    for span in spans:
        if span.suite is None or span.stop < span.start:
            continue
        lane = "node" if span.gpu is None else ("beside" if span.suite in beside else "main")
        lanes.setdefault((span.gpu, lane), []).append(span)
    found = []
    order = {"main": 0, "beside": 1, "node": 2}
    for (gpu, lane), members in sorted(
        lanes.items(), key=lambda kv: (kv[0][0] is None, kv[0][0] or 0, order[kv[0][1]])
    ):
        waited = _wait_before_timing(members, timed) if lane == "main" else None
        found.append(
            LaneSpan(
                gpu,
                lane,
                min(s.start for s in members) - started_at,
                max(s.stop for s in members) - started_at,
                math.fsum(s.stop - s.start for s in members),
                waited,
            )
        )
    return tuple(found)


def _wait_before_timing(members: list[WorkSpan], timed: set[str]) -> float | None:
    """The longest gap between a main worker's consecutive tests up to its first timed one (None
    without both untimed and timed tests): where it waited for its beside lane. A worker holds its
    last test until it is told what follows, so the wait falls before its last untimed test."""
    ordered = sorted(members, key=lambda s: s.start)
    first_timed = next((i for i, s in enumerate(ordered) if s.suite in timed), None)
    if not first_timed:
        return None
    return max(max(0.0, ordered[i].start - ordered[i - 1].stop) for i in range(1, first_timed + 1))


@dataclass(frozen=True)
class TimeUsed:
    """A run's time: wall clock, and the tests' durations by suite, kind of work and GPU."""

    wall_s: float
    rows: tuple[TimeRow, ...] = field(default=())
    lanes: tuple[LaneSpan, ...] = field(default=())

    @property
    def startup_s(self) -> float | None:
        """From the run's start to its first test's (workers starting, collecting, discovering)."""
        return min((lane.first_s for lane in self.lanes), default=None)

    def gpus(self) -> list[int]:
        return sorted({r.gpu for r in self.rows if r.gpu is not None})

    def serial_s(self, gpu: int) -> float:
        """A GPU's main worker's time: its tests, beside work left out (it ran alongside)."""
        return math.fsum(r.seconds for r in self.rows if r.gpu == gpu and not r.beside)

    def node_s(self) -> float:
        return math.fsum(r.seconds for r in self.rows if r.gpu is None)

    def to_dict(self) -> dict[str, object]:
        return {
            "wall_s": round(self.wall_s, 3),
            "rows": [r.to_dict() for r in self.rows],
            "serial_s": {str(g): round(self.serial_s(g), 3) for g in self.gpus()},
            "node_s": round(self.node_s(), 3),
            **(
                {"startup_s": round(self.startup_s or 0.0, 3), "lanes": [lane.to_dict() for lane in self.lanes]}
                if self.lanes
                else {}
            ),
        }


def time_used(
    wall_s: float, tests: Iterable[tuple[str | None, str | None, int | None, float]], beside_suites: Iterable[str] = ()
) -> TimeUsed:
    """Sum the tests' durations (suite, kind of work, GPU index, seconds) into rows; tests of a
    `beside_suites` suite on a GPU ran in its beside lane."""
    beside = set(beside_suites)
    sums: dict[tuple[str, str, int | None], list[float]] = {}
    for suite, work, gpu, seconds in tests:
        if suite is None:
            continue
        sums.setdefault((suite, work or "per-gpu", gpu), []).append(seconds)
    order = {"per-gpu": 0, "shared": 1, "node-wide": 2}
    rows = [
        TimeRow(suite, work, gpu, math.fsum(values), len(values), beside=gpu is not None and suite in beside)
        for (suite, work, gpu), values in sorted(
            sums.items(), key=lambda item: (item[0][0], order.get(item[0][1], 3), item[0][2] is None, item[0][2] or 0)
        )
    ]
    return TimeUsed(wall_s, tuple(rows))


def time_table(used: TimeUsed) -> list[str]:
    """The run's time, one line per suite and kind of work, a column per GPU and one for the node."""
    gpus = used.gpus()
    keys: dict[tuple[str, str], dict[int | None, TimeRow]] = {}
    for row in used.rows:
        keys.setdefault((row.suite, row.work), {})[row.gpu] = row
    header = ["suite", "work", *(f"GPU {g}" for g in gpus), "node" if gpus else "time"]
    lines = [header]
    for (suite, work), cells in keys.items():
        beside = any(r.beside for r in cells.values())
        values = [_cell(cells.get(g)) for g in gpus] + [_cell(cells.get(None))]
        lines.append([suite, work.replace("-", " ") + (" (beside)" if beside else ""), *values])
    if gpus:
        lines.append(["main worker, in turn", "", *(_seconds(used.serial_s(g)) for g in gpus), _seconds(used.node_s())])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    table = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines]
    return table + lane_lines(used)


def lane_lines(used: TimeUsed) -> list[str]:
    """When each worker ran: 'startup 21 s (workers starting, collecting)', then per worker 'GPU 0
    main worker: tests from 21 s to 315 s, 294 s in tests, 33 s waiting for its beside lane'."""
    if not used.lanes:
        return []
    lines = [f"startup {_seconds(used.startup_s or 0.0)} (from the run's start to its first test)"]
    for lane in used.lanes:
        who = (
            "node-wide tests"
            if lane.gpu is None
            else f"GPU {lane.gpu} {'main worker' if lane.lane == 'main' else 'beside lane'}"
        )
        line = (
            f"{who}: tests from {_seconds(lane.first_s)} to {_seconds(lane.last_s)}, {_seconds(lane.busy_s)} in tests, "
            f"{_seconds(lane.idle_s)} between them"
        )
        if lane.waited_s is not None:
            line += f" ({_seconds(lane.waited_s)} waiting for its beside lane)"
        lines.append(line)
    last = max(lane.last_s for lane in used.lanes)
    lines.append(f"after the last test {_seconds(max(0.0, used.wall_s - last))} (the report, the workers ending)")
    return lines


def _cell(row: TimeRow | None) -> str:
    return "-" if row is None else _seconds(row.seconds)


def _seconds(value: float) -> str:
    return f"{value:.0f} s"
