"""The timing engine: warm-up to a steady rate, rounds sized by a time budget, device-side timing.

On a GPU each round is bracketed by device events (CUDA or HIP) and the host synchronizes once
at the end of the window, so host overhead never lands inside a measurement unless the host
cannot keep the device fed (launch-bound work: use graph replay). On the CPU a round is timed
with `perf_counter`. Work is measured as the device would see it in training:

* warm-up runs until two consecutive windows agree within a tolerance (clocks and power have
  settled) or a time limit, and says which happened;
* calls are batched into rounds of at least `round_s`, so event resolution and per-round
  overhead stay far below the effects the gate looks for;
* caches are defeated by operand rotation: enough distinct operand sets that their total
  exceeds twice the largest cache (L2, or Infinity Cache / MALL on MI300), so back-to-back calls
  read from memory as they do in a model, without a flush kernel between calls;
* throughput is total work / total time of the measured window (not a mean of rates, which is
  biased high); the median, IQR and MAD come with it to judge how noisy the window was;
* a round stalled by the host or the VM (far slower than every other, in at most a tenth of the
  rounds) is left out of the figure and reported: on a fresh H100 VM two of 21 FP8 Llama steps
  took 1.5x the median step and moved the window's rate by 5-7% (docs/perf.md). Slowness in
  more rounds than that is the work's own, and stays in.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from rocm_validate.perf.stats import SampleSummary, block_slices, relative_mad

T = TypeVar("T")

MIB = 1024 * 1024
_MIN_CACHE_DEFEAT_BYTES = 64 * MIB
_MAX_CALLS_PER_ROUND = 100_000


@dataclass(frozen=True)
class TimingPlan:
    """How long to warm up and to measure one piece of work."""

    warmup_min_s: float  # always warm up at least this long
    warmup_max_s: float  # give up waiting for a steady rate after this long
    steady_tolerance: float  # consecutive warm-up windows within this relative change count as steady
    window_s: float  # measured time budget
    round_s: float  # target duration of one round; calls are batched to reach it
    min_rounds: int
    max_rounds: int
    graph: bool = False  # replay a captured CUDA/HIP graph per round (launch-bound work)
    sustained: bool = False  # a sustained average: its noise is that of the window mean (see stats)

    def __post_init__(self) -> None:
        if not (0 <= self.warmup_min_s <= self.warmup_max_s):
            raise ValueError(f"warm-up needs 0 <= min <= max, found {self.warmup_min_s} and {self.warmup_max_s}")
        if self.window_s <= 0 or self.round_s <= 0:
            raise ValueError(f"window and round must be positive seconds, found {self.window_s} and {self.round_s}")
        if not (1 <= self.min_rounds <= self.max_rounds):
            raise ValueError(f"rounds need 1 <= min <= max, found {self.min_rounds} and {self.max_rounds}")

    def with_window(self, factor: float) -> TimingPlan:
        """The same plan with the measured window (and warm-up limit) scaled by `factor`."""
        return replace(
            self, window_s=self.window_s * factor, warmup_max_s=max(self.warmup_min_s, self.warmup_max_s * factor)
        )


GPU_PLAN = TimingPlan(
    warmup_min_s=0.15,
    warmup_max_s=1.5,
    steady_tolerance=0.01,
    window_s=0.4,
    round_s=0.005,
    min_rounds=10,
    max_rounds=400,
)

if TYPE_CHECKING:
    import torch
CPU_PLAN = TimingPlan(
    warmup_min_s=0.02,
    warmup_max_s=0.2,
    steady_tolerance=0.05,
    window_s=0.15,
    round_s=0.01,
    min_rounds=5,
    max_rounds=100,
)


# Compute-bound kernels draw the board to its power cap: an H100 runs a bf16 8192^3 GEMM at boost
# clock for about 0.5 s, then alternates with 1.1-1.4 GHz under the software power cap, so a short
# window after a short warm-up measures the boost phase in one run and the capped phase in the
# next (docs/perf.md). Sustained work warms up past the boost phase and averages a longer window:
# the figure is the sustained rate training sees, not a peak interval.
SUSTAINED_GPU_CHANGES: dict[str, Any] = {"warmup_min_s": 2.0, "warmup_max_s": 3.0, "window_s": 1.0, "sustained": True}


def sustained_changes(backend: str) -> dict[str, Any]:
    """Plan changes for power-hungry work on a GPU; none on the CPU (no boost / cap cycle there)."""
    return {} if backend == "cpu" else dict(SUSTAINED_GPU_CHANGES)


def default_plan(backend: str) -> TimingPlan:
    """GPU plans warm up long enough for clocks to settle; the CPU plan is a smoke-sized run."""
    return CPU_PLAN if backend == "cpu" else GPU_PLAN


def calls_per_round(call_s: float, round_s: float) -> int:
    """Calls to batch so a round lasts at least `round_s` (one call when a call is longer)."""
    if call_s <= 0 or not math.isfinite(call_s):
        return _MAX_CALLS_PER_ROUND
    return max(1, min(_MAX_CALLS_PER_ROUND, math.ceil(round_s / call_s)))


def round_count(round_seconds: float, plan: TimingPlan) -> int:
    """Rounds that fill the window, within the plan's bounds."""
    if round_seconds <= 0 or not math.isfinite(round_seconds):
        return plan.max_rounds
    return max(plan.min_rounds, min(plan.max_rounds, math.floor(plan.window_s / round_seconds)))


# A round is a stall when it is this much slower than the window's median round and beyond
# the far-out fence (Q3 + 3 IQR); stalls are left out only when they are at most a tenth of
# the rounds of a window of at least MIN_ROUNDS_FOR_STALLS (else they are the work's own pace).
STALL_EXCESS = 0.20
STALL_FENCE_IQR = 3.0
MAX_STALL_SHARE = 0.10
MIN_ROUNDS_FOR_STALLS = 10


def stall_rounds(seconds: Sequence[float]) -> tuple[int, ...]:
    """Indices of the rounds that stalled (see STALL_EXCESS); () when none, or when too many
    rounds are slow for them to be stalls."""
    if len(seconds) < MIN_ROUNDS_FOR_STALLS:
        return ()
    q1, median, q3 = statistics.quantiles(seconds, n=4)
    fence = max(q3 + STALL_FENCE_IQR * (q3 - q1), median * (1 + STALL_EXCESS))
    slow = tuple(i for i, s in enumerate(seconds) if s > fence)
    return slow if len(slow) <= MAX_STALL_SHARE * len(seconds) else ()


def is_steady(rates: Sequence[float], tolerance: float, windows: int = 3) -> bool:
    """Whether the last `windows` warm-up windows ran at rates within `tolerance` of each other
    (three windows, so a slow drift is not mistaken for a plateau)."""
    if len(rates) < windows:
        return False
    recent = rates[-windows:]
    low = min(recent)
    return low > 0 and (max(recent) - low) / low <= tolerance


def cache_defeat_bytes(l2_cache_bytes: int | None, last_level_cache_bytes: int | None) -> int:
    """Bytes of distinct data that no cache of the device can hold: twice the largest cache
    (L2 on NVIDIA, the 256 MiB Infinity Cache on MI300), and at least 64 MiB."""
    largest = max(l2_cache_bytes or 0, last_level_cache_bytes or 0)
    return max(_MIN_CACHE_DEFEAT_BYTES, 2 * largest)


def rotation_count(set_bytes: int, defeat_bytes: int, limit: int = 16) -> int:
    """Operand sets to cycle through so the sets together exceed `defeat_bytes`, at most `limit`.

    Every full-size GPU case needs 1-4 sets; the limit only bites on the CPU's tiny operands,
    which then stay cache-resident (the CPU run is a smoke test of the machinery, not a figure).
    """
    if set_bytes <= 0:
        raise ValueError(f"an operand set must occupy some bytes, found {set_bytes}")
    return max(1, min(limit, math.ceil(defeat_bytes / set_bytes)))


class Rotation(Generic[T]):
    """Cycles through operand sets so each call reads data no cache still holds."""

    def __init__(self, sets: Sequence[T]) -> None:
        if not sets:
            raise ValueError("a rotation needs at least one operand set")
        self.sets = tuple(sets)
        self._next = 0

    def __len__(self) -> int:
        return len(self.sets)

    def next(self) -> T:
        chosen = self.sets[self._next]
        self._next = (self._next + 1) % len(self.sets)
        return chosen


class Clock(Protocol):
    """Marks points in the work stream and reads the seconds between two marks."""

    method: str

    def mark(self) -> Any: ...

    def synchronize(self) -> None: ...

    def seconds_between(self, start: Any, end: Any) -> float: ...


class HostClock:
    """Wall-clock marks, synchronizing the device first when one is given (CPU work, or a GPU
    measured from the host as a launch-latency test must be)."""

    def __init__(self, synchronize: Callable[[], None] | None = None) -> None:
        self._synchronize = synchronize
        self.method = "host-clock" if synchronize is None else "host-clock-synchronized"

    def synchronize(self) -> None:
        if self._synchronize is not None:
            self._synchronize()

    def mark(self) -> float:
        self.synchronize()
        return time.perf_counter()

    def seconds_between(self, start: float, end: float) -> float:
        return end - start


class DeviceEventClock:
    """CUDA/HIP events recorded on the current stream; read after one synchronize."""

    method = "device-events"

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def mark(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def seconds_between(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0


def clock_for(torch_device: torch.device) -> Clock:
    """Device events on a GPU, the host clock on the CPU."""
    if getattr(torch_device, "type", str(torch_device)) == "cuda":
        import torch

        return DeviceEventClock(torch)
    return HostClock()


@dataclass(frozen=True)
class Timing:
    """What one measurement found: the rounds, how they were timed, and how warm-up went."""

    summary: SampleSummary
    method: str  # "device-events", "graph-replay", "host-clock", "host-clock-synchronized"
    warmup_s: float
    warmup_steady: bool  # False: the rate was still moving when warm-up hit its limit
    sustained: bool = False
    # Host time (time.perf_counter) when the window's first round was marked and when the last
    # finished, and each round's start and end in seconds from the first mark (device time):
    # what aligns clock readings with rounds.
    window_host: tuple[float, float] | None = None
    round_spans: tuple[tuple[float, float], ...] = ()
    # Seconds per call of the rounds left out of the summary as stalls (stall_rounds), and of
    # rounds left out because an interleaved partner stalled in them.
    stalls: tuple[float, ...] = ()
    dropped_with_partner: int = 0

    def block_spans(self) -> tuple[tuple[float, float], ...]:
        """(start, end) offsets of each block of rounds (stats.block_slices), () when unknown."""
        if len(self.round_spans) != self.summary.rounds:
            return ()
        return tuple(
            (self.round_spans[cut][0][0], self.round_spans[cut][-1][1]) for cut in block_slices(self.summary.rounds)
        )

    @property
    def dispersion(self) -> float:
        """The relative spread the gate works with: of the window mean for sustained averages,
        of the block means otherwise."""
        return self.summary.mean_dispersion if self.sustained else self.summary.dispersion

    @property
    def calls(self) -> int:
        return self.summary.total_calls

    def rate(self, work_per_call: float) -> float:
        """Total work / total time of the measured window."""
        return work_per_call * self.summary.total_calls / self.summary.total_seconds

    def details(self) -> dict[str, Any]:
        """JSON-ready timing facts for a metric's `extra`."""
        stats = self.summary.benchmark_stats()
        return {
            "method": self.method,
            "rounds": self.summary.rounds,
            "calls_per_round": self.summary.calls,
            "window_s": round(self.summary.total_seconds, 6),
            "warmup_s": round(self.warmup_s, 4),
            "warmup_steady": self.warmup_steady,
            "sustained": self.sustained,
            "median_s": stats["median"],
            "mean_s": self.summary.mean,
            "iqr_s": stats["iqr"],
            "relative_mad": relative_mad(self.summary),
            "stats": stats,
            **({"stalls": self.stall_details()} if self.stalls or self.dropped_with_partner else {}),
        }

    def stall_details(self) -> dict[str, Any]:
        """How many rounds were left out as stalls, of how many, and the worst against the median."""
        return {
            "rounds": len(self.stalls),
            "with_partner": self.dropped_with_partner,
            "of": self.summary.rounds + len(self.stalls) + self.dropped_with_partner,
            "worst_over_median": round(max(self.stalls) / self.summary.median, 3) if self.stalls else None,
        }


def stall_note(timing_details: Mapping[str, Any]) -> str:
    """'2 of 21 rounds stalled (worst 1.54x the median round) and were left out ...' from a
    metric's timing details ('' when no round was left out)."""
    stalls = timing_details.get("stalls")
    if not stalls:
        return ""
    parts = []
    if stalls["rounds"]:
        parts.append(
            f"{stalls['rounds']} of {stalls['of']} rounds stalled (worst {stalls['worst_over_median']:.2f}x the median "
            f"round) and were left out of the figure"
        )
    if stalls["with_partner"]:
        parts.append(f"{stalls['with_partner']} rounds left out because the work timed beside it stalled there")
    return "; ".join(parts) + "; a pause of the host or VM, not the work (rerun if it recurs)"


@dataclass
class _Job:
    """One function under measurement and what warm-up learned about it."""

    fn: Callable[[], Any]
    call_s: float = math.inf
    rates: list[float] = field(default_factory=list)
    calls: int = 1
    round_fn: Callable[[], Any] | None = None


def _timed_window(clock: Clock, fn: Callable[[], Any], calls: int) -> float:
    start = clock.mark()
    for _ in range(calls):
        fn()
    end = clock.mark()
    clock.synchronize()
    return clock.seconds_between(start, end)


def _warm_up(jobs: Sequence[_Job], clock: Clock, plan: TimingPlan) -> tuple[float, bool]:
    """Run every job in turn until each one's rate is steady (after `warmup_min_s`) or time runs out."""
    window_s = max(plan.round_s, min(0.05, plan.warmup_max_s / 4))
    for job in jobs:
        job.call_s = _timed_window(clock, job.fn, 1)  # first call: compile, autotune, allocate
    began = time.perf_counter()
    while True:
        for job in jobs:
            calls = calls_per_round(job.call_s, window_s)
            seconds = _timed_window(clock, job.fn, calls)
            job.call_s = seconds / calls
            job.rates.append(1.0 / job.call_s)
        elapsed = time.perf_counter() - began
        steady = all(is_steady(job.rates, plan.steady_tolerance) for job in jobs)
        if (steady and elapsed >= plan.warmup_min_s) or elapsed >= plan.warmup_max_s:
            return elapsed, steady


def _capture_graph(fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
    """A CUDA/HIP graph of `calls` calls of fn, captured on a side stream as PyTorch requires."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph.replay


def measure_interleaved(fns: Mapping[str, Callable[[], Any]], plan: TimingPlan, clock: Clock) -> dict[str, Timing]:
    """Time several functions in alternating rounds (A B A B ...), so slow drift of clocks or
    temperature affects each alike and their ratio stays honest. Returns one Timing per name."""
    if not fns:
        raise ValueError("nothing to measure")
    jobs = {name: _Job(fn) for name, fn in fns.items()}
    warmup_s, steady = _warm_up(list(jobs.values()), clock, plan)
    method = clock.method
    for job in jobs.values():
        job.calls = calls_per_round(job.call_s, plan.round_s)
        job.round_fn = None
        if plan.graph:
            job.round_fn = _capture_graph(job.fn, job.calls)
            method = "graph-replay"
    rounds = round_count(sum(job.call_s * job.calls for job in jobs.values()), plan)
    marks: dict[str, list[tuple[Any, Any]]] = {name: [] for name in jobs}
    began = time.perf_counter()
    for _ in range(rounds):
        for name, job in jobs.items():
            start = clock.mark()
            if job.round_fn is not None:
                job.round_fn()
            else:
                for _ in range(job.calls):
                    job.fn()
            marks[name].append((start, clock.mark()))
    clock.synchronize()
    ended = time.perf_counter()
    first = next(iter(marks.values()))[0][0]
    seconds = {name: [clock.seconds_between(s, e) / jobs[name].calls for s, e in marks[name]] for name in jobs}
    stalled = {name: set(stall_rounds(values)) for name, values in seconds.items()}
    left_out = set().union(*stalled.values())  # a stalled round goes for every job, so pairs stay paired
    return {
        name: Timing(
            summary=SampleSummary(
                seconds=tuple(s for i, s in enumerate(seconds[name]) if i not in left_out), calls=jobs[name].calls
            ),
            method=method,
            warmup_s=warmup_s,
            warmup_steady=steady,
            sustained=plan.sustained,
            window_host=(began, ended),
            round_spans=tuple(
                (clock.seconds_between(first, s), clock.seconds_between(first, e))
                for i, (s, e) in enumerate(marks[name])
                if i not in left_out
            ),
            stalls=tuple(seconds[name][i] for i in sorted(stalled[name])),
            dropped_with_partner=len(left_out - stalled[name]),
        )
        for name in jobs
    }


def measure(fn: Callable[[], Any], plan: TimingPlan, clock: Clock) -> Timing:
    """Warm up, then time `fn` over a window of rounds chosen by the plan's time budget."""
    return measure_interleaved({"": fn}, plan, clock)[""]
