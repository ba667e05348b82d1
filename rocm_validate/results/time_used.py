"""Where a run's time went (pure, torch-free): the tests' durations by suite, kind of work and GPU,
when each worker ran, and the table the summary prints. `rocm_validate.node.budget` models the
time a run should take and reads measured rows from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field


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
