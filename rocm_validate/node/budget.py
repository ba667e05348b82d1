"""Every level's budget, and how long a whole-node run should take (pure, torch-free).

On one device a level has its stated budget (`LevelBudget.one_device`, docs/levels.md). On a node,
the GPUs run side by side, so a node run takes as long as its busiest GPU, plus what runs once:

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
from dataclasses import dataclass, replace

from rocm_validate.core.levels import TIMEOUTS_S, minutes
from rocm_validate.core.plan import RunBudget
from rocm_validate.platform.device_info import DeviceInfo
from rocm_validate.results.time_used import TimeRow


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
    """A level's budgets: its stated budget on one device (one GPU, or a CI-sized CPU of 2 cores),
    and its allowances on a GPU, per suite, for node runs."""

    startup_s: float
    suites: Mapping[str, SuiteWork]
    collectives: CollectivesCost
    one_gpu_s: float  # the level's stated budget on one GPU
    one_cpu_s: float  # and on a CI-sized CPU (2 cores)
    lanes: bool = True  # beside lanes at this level (not at extended: node/workers.py beside_lanes)

    def one_device(self, is_gpu: bool) -> float:
        return self.one_gpu_s if is_gpu else self.one_cpu_s

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
# GPU); the collectives 15 s on 2 x H100. Outside the tests: 15 s from the start to the first
# test (four workers importing torch and collecting) and 6 s after the last (the report, the
# workers ending) on a fresh 2 x H200 (docs/measurements/node-2xh200-2026-11-28d-time.txt).
# The perf suite has no shared work at the standard level: its compiled steps (BERT-L, the Llama
# decoder, the torchao and Transformer Engine FP8 steps against the compiled bf16 one) cost a cold
# compile each and run at the extended level.
_STANDARD = {
    "preflight": SuiteWork(per_gpu_s=5),
    "correctness": SuiteWork(per_gpu_s=100, shared_s=60, largest_shared_s=26),
    "perf": SuiteWork(per_gpu_s=90, timed=True),
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


# Every level's budgets. On one device, as stated and checked on the lent H100 and on the 2-core CPU
# CI machine (docs/levels.md); for a node, from its size and the suites selected.
BUDGETS: dict[str, LevelBudget] = {
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
        one_gpu_s=60,
        one_cpu_s=90,
    ),
    "standard": LevelBudget(
        startup_s=20, suites=_STANDARD, collectives=STANDARD_COLLECTIVES, one_gpu_s=600, one_cpu_s=420
    ),
    "extended": LevelBudget(
        startup_s=10,
        suites={
            **_scaled(_STANDARD, 4.0),
            "correctness": SuiteWork(per_gpu_s=400, shared_s=60, largest_shared_s=26),
            # every training step (parity, FSDP 8 layers, Float8, DDP BERT-L, LoRA): 113-168 s on
            # 2 x H200 for the parts measured together (docs/measurements/node-2xh200-2026-11-28f)
            "collectives": SuiteWork(node_s=210),
        },
        collectives=STANDARD_COLLECTIVES,
        one_gpu_s=2400,
        one_cpu_s=900,
        lanes=False,
    ),
}


def run_budget(level: str, suites: Iterable[str], device: DeviceInfo, gpus: int, timeout_s: float | None) -> RunBudget:
    """The level's budget for a run on `device`, or for `gpus` GPUs (a whole-node run with pinned
    workers and two or more GPUs; 0 otherwise), and the header's line for the device."""
    budget = BUDGETS[level]
    seconds = budget.seconds(gpus, suites) if gpus else budget.one_device(device.is_gpu)
    return RunBudget(level, seconds, gpus, describe_budget(level, device.is_gpu, timeout_s))


def describe_budget(level: str, is_gpu: bool, timeout_s: float | None) -> str:
    """'standard: budget 10 min on one GPU; per-test timeout 300-420 s by suite'."""
    where = "on one GPU" if is_gpu else "on a 2-core CPU"
    if timeout_s is not None:
        timeouts = f"per-test timeout {timeout_s:g} s"
    else:
        values = sorted({t[level] for t in TIMEOUTS_S.values()})
        timeouts = f"per-test timeout {values[0]:g}-{values[-1]:g} s by suite"
    return f"{level}: budget {minutes(BUDGETS[level].one_device(is_gpu))} {where}; {timeouts}"


def describe_node_budget(level: str, gpus: int, budget_s: float) -> str:
    """'standard: budget 5 min for 2 GPUs (per-GPU work on each, shared work divided, node-wide once)'."""
    return (
        f"{level}: budget {minutes(budget_s)} for {gpus} GPUs (per-GPU work on each, shared work divided among "
        f"them, node-wide work once: docs/node.md)"
    )


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
