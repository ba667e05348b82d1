"""Where a test's work runs in a whole-node run: on every GPU, shared among the GPUs, or once for
the node (pure, torch-free).

Two kinds of work are mixed in the suites. *Per-GPU* work (numerics on this GPU, this GPU's
throughput, its memory) must run on every GPU: that is how a bad GPU is found. *Stack-level*
work (does this software stack converge, does the compiler produce the same model) asks one
question per node; running it in full on every GPU repeats the same answer N times. So:

* **per GPU** (the default): every GPU runs the test.
* **shared** (`@pytest.mark.rocm_shared`): stack-level work, done once per node. Either the test
  runs on one GPU, the GPUs taking such tests in turns balanced by their stated seconds
  (`rocm_shared(seconds=60)`; tests of one `group`, which share an expensive fixture, go to the
  same GPU), or, with `rocm_shared(split=True)`, every GPU runs the test on its own share of the
  work (the `rocm_share` fixture says which: the convergence suite's seeds).
* **node-wide**: the collectives suite (every GPU at once) and tests that pool what every GPU
  produced (the convergence suite's verdicts): once, on the first GPU's worker, after every
  GPU's own tests (`node/scheduling.py`).

Every worker of a node run computes the same assignment from the same collection, so each keeps
exactly its own work (`kept_by`); a replacement for a crashed worker keeps the same.

**Lanes.** The convergence suite's training times nothing and is launch-bound: a second worker
per GPU (the *beside* lane) runs it while the first (the *main* lane) runs that GPU's other
numerics; the main lane's timed suites (perf) wait until the beside lane has finished, so no
measurement shares its GPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rocm_validate.core.plan import BESIDE, MAIN
from rocm_validate.core.suites import BESIDE_SUITES

PER_GPU, SHARED, NODE_WIDE = "per-gpu", "shared", "node-wide"
KINDS = (PER_GPU, SHARED, NODE_WIDE)
SHARED_MARKER = "rocm_shared"
SHARED_MARKER_HELP = (
    "rocm_shared(seconds=1, group=None, split=False): stack-level work, done once per node in a whole-node run: "
    "on one GPU (tests of one group on the same GPU), or with split=True by every GPU on its share (rocm_share)"
)
LANE_VARIABLE = "ROCM_VALIDATE_NODE_LANE"  # set in the beside lane's worker: 'beside'
DEFAULT_SECONDS = 1.0


@dataclass(frozen=True)
class SharedSpec:
    """What a `rocm_shared` marker says about its test."""

    seconds: float = DEFAULT_SECONDS  # its time on one GPU, to balance the GPUs' shares
    group: str | None = None  # tests sharing an expensive fixture: kept on one GPU
    split: bool = False  # every GPU runs it on its own share instead


def shared_spec(args: Sequence[object], kwargs: Mapping[str, object]) -> SharedSpec:
    """The marker's arguments, checked; ValueError naming the accepted forms."""
    unknown = sorted(set(kwargs) - {"seconds", "group", "split"})
    seconds = kwargs.get("seconds", DEFAULT_SECONDS)
    group = kwargs.get("group")
    split = kwargs.get("split", False)
    if (
        args
        or unknown
        or isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not (math.isfinite(seconds) and seconds > 0)
        or (group is not None and not (isinstance(group, str) and group))
        or not isinstance(split, bool)
    ):
        found = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in sorted(kwargs.items()))])
        raise ValueError(
            f"{SHARED_MARKER} takes seconds=<positive number>, group=<name> and split=<bool> by keyword, "
            f"found {found or 'nothing'}"
        )
    return SharedSpec(float(seconds), group, split)


@dataclass(frozen=True)
class SharedTest:
    """A shared test to place on one GPU."""

    nodeid: str
    seconds: float
    group: str | None = None


def assign_shared(tests: Sequence[SharedTest], gpus: int) -> dict[str, int]:
    """Each test's GPU position (0..gpus-1): its group (a test alone is a group of one), longest
    first, onto the GPU with the least shared work so far, ties to the lower position (LPT, within
    4/3 of the best balance). Deterministic: every worker computes the same answer."""
    if gpus < 1:
        raise ValueError(f"shared work needs at least one GPU, found {gpus}")
    groups: dict[str, list[SharedTest]] = {}
    for test in tests:
        groups.setdefault(test.group or f"\0{test.nodeid}", []).append(test)
    order = sorted(groups.values(), key=lambda g: -math.fsum(t.seconds for t in g))  # stable: first seen first
    load = [0.0] * gpus
    placed: dict[str, int] = {}
    for group in order:
        position = min(range(gpus), key=lambda p: (load[p], p))
        load[position] += math.fsum(t.seconds for t in group)
        placed.update((t.nodeid, position) for t in group)
    return placed


@dataclass(frozen=True)
class Share:
    """A GPU's part of split work: position `position` of `count` GPUs (0 of 1 outside node runs)."""

    position: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.position < self.count:
            raise ValueError(f"share position must lie in [0, {self.count}), found {self.position}")

    def of(self, items: Sequence[int], rotation: int = 0) -> tuple[int, ...]:
        """This share's items: item i goes to position (i + rotation) mod count, so every GPU gets
        every `count`-th item and a rotation per task keeps the first GPU from taking every extra."""
        return tuple(item for i, item in enumerate(items) if (i + rotation) % self.count == self.position)


def kept_by(
    kind: str,
    suite: str | None,
    lane: str,
    beside_lanes: bool,
    assigned: int | None,
    position: int,
    lead: bool,
) -> bool:
    """Whether a worker of a node run (its lane, its GPU's position, whether it is the first GPU's
    main worker) keeps a test of `kind` and `suite`; `assigned` is a shared test's GPU position
    (None for split work and other kinds)."""
    in_beside = beside_lanes and suite in BESIDE_SUITES
    if kind == NODE_WIDE:
        return lane == MAIN and lead
    if assigned is not None and assigned != position:
        return False
    return (lane == BESIDE) == in_beside
