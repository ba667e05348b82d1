"""The run context: the one record of a run kept in `config.stash` (under `STATE_KEY`, the
package's only run-level stash key): settings, the plan, results, and one part per concern.

The top-level plugin makes it first (its tryfirst `pytest_configure`); each concern's own
`pytest_configure` then fills its part: a record of the concern's own type, stored with `put` and
read with `part`, keyed by that type, so core holds every suite's part without importing a suite
(the layers, tests/test_layout.py, forbid that, and an import cycle with a concern's own module).
The parts: `Outputs` (core.outputs), `KnownDefects` (core.known_defects), `Backstop`
(core.watchdog), `CompileCache` and `CacheContents` (core.compile_cache), `PerfRun` (perf.plugin),
`HostRoot` (preflight.plugin), `ConvergenceSettings`, `CollectiveSettings` (their suites' plugins).
A test's own state stays in `item.stash` (`PENDING_METRICS_KEY`, `SUITE_KEY` below)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import pytest

from rocm_validate.core.options import Settings
from rocm_validate.errors import UsageError

if TYPE_CHECKING:
    from rocm_validate.core.plan import NodePlan, RunPlan
    from rocm_validate.platform.devices import DeviceInfo
    from rocm_validate.results.metrics import GpuRef, Metric
    from rocm_validate.results.report import TestResult

Part = TypeVar("Part")


@dataclass
class RunState:
    """The run context: everything the plugin remembers about one pytest run (one per process
    under xdist). Made before the run's settings are read (the outputs are claimed first), so
    `settings` is filled in right after, in the same `pytest_configure`."""

    config: pytest.Config
    # Resolves this process's plan (rocm_validate.node.resolve, handed in by the top-level plugin):
    # called once, on the first read, since discovery imports torch.
    resolve: Callable[[RunState], RunPlan]
    results: dict[str, TestResult] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)  # for the time used against the level's budget
    started_at: float = field(default_factory=time.time)  # the same moment, epoch: tests' start times are epoch
    worker_gpus: dict[str, int | None] = field(default_factory=dict)  # controller: each xdist worker's GPU, by id
    # Controller of a whole-node run over pinned workers: set, with the -n the user gave (or None).
    pinned_workers: bool = False
    requested_workers: int | None = None
    collected: dict[str, int] = field(default_factory=dict)  # controller: each xdist worker's test count, by id
    settings: Settings = field(init=False)  # set by the top-level plugin once its outputs are claimed
    _plan: RunPlan | None = None
    _parts: dict[type, object] = field(default_factory=dict)

    def put(self, part: object) -> None:
        """Keep a concern's record (one per type: a second replaces the first)."""
        self._parts[type(part)] = part

    def find(self, kind: type[Part]) -> Part | None:
        """The concern's record of type `kind`, or None when its configure did not fill it."""
        found = self._parts.get(kind)
        return found if isinstance(found, kind) else None

    def part(self, kind: type[Part]) -> Part:
        """The concern's record of type `kind`; a usage error naming its module when that
        module's configure never filled it (e.g. its plugin disabled with -p no:...)."""
        found = self.find(kind)
        if found is None:
            raise UsageError(
                f"{kind.__module__} holds no {kind.__name__} for this run: its pytest_configure did not run; "
                f"remove '-p no:{kind.__module__}'"
            )
        return found

    def drop(self, kind: type) -> None:
        """Forget the concern's record of type `kind` (one that was closed)."""
        self._parts.pop(kind, None)

    @property
    def plan(self) -> RunPlan:
        """The run plan, resolved on first read (discovery imports torch)."""
        if self._plan is None:
            self._plan = self.resolve(self)
        return self._plan

    @property
    def discovered(self) -> bool:
        return self._plan is not None

    @property
    def node(self) -> NodePlan | None:
        """A whole-node run's part of the plan, once resolved (None before, and outside node runs)."""
        return None if self._plan is None else self._plan.node

    def devices(self) -> list[DeviceInfo]:
        """Every device this process found."""
        return list(self.plan.found)

    def device(self) -> DeviceInfo:
        """The device this process validates (--rocm-device; in a whole-node run, a pinned
        worker's own GPU, elsewhere the first selected device)."""
        return self.plan.device

    def node_devices(self) -> list[DeviceInfo]:
        """Every device this run validates: the selected GPUs of a whole-node run (as the
        controller found them, also in a worker), else the one selected device."""
        return list(self.plan.devices)

    def report_gpu(self, report: object) -> GpuRef | None:
        """The GPU a report (from a worker, or xdist's report of a crashed one) belongs to."""
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        index = self.worker_gpus.get(str(getattr(gateway, "id", "")))
        if index is None or self.node is None:
            return None
        return self.node.gpu_ref(index)

    def metrics(self) -> list[Metric]:
        """Every recorded metric, ordered by test id (then GPU) so xdist runs print the same table."""
        from rocm_validate.results.report import metrics_in_order

        return metrics_in_order(self.results.values())


STATE_KEY = pytest.StashKey[RunState]()
# Per test (item.stash), not per run:
PENDING_METRICS_KEY = pytest.StashKey["list[Metric]"]()
SUITE_KEY = pytest.StashKey["str | None"]()


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker process (the controller writes reports and baselines' summaries)."""
    return hasattr(config, "workerinput")


def run_state(config: pytest.Config) -> RunState:
    """The run's state; a clear error if the plugin was not configured (e.g. -p no:rocm_validate)."""
    try:
        return config.stash[STATE_KEY]
    except KeyError:
        raise UsageError("rocm_validate is not active in this run; remove '-p no:rocm_validate'") from None


def find_part(config: pytest.Config, kind: type[Part]) -> Part | None:
    """A concern's record in the run context, or None (no context: the run stopped before the
    top-level plugin's configure made it; or the concern's configure did not fill it)."""
    state = config.stash.get(STATE_KEY, None)
    return None if state is None else state.find(kind)
