"""Per-run state kept in `config.stash`: settings, discovered devices, results and metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from rocm_validate.core.options import Settings
from rocm_validate.errors import UsageError

if TYPE_CHECKING:
    from rocm_validate.core.plan import NodePlan, RunPlan
    from rocm_validate.platform.devices import DeviceInfo
    from rocm_validate.results.metrics import GpuRef, Metric
    from rocm_validate.results.report import TestResult


@dataclass
class RunState:
    """Everything the plugin remembers about one pytest run (one per process under xdist)."""

    config: pytest.Config
    settings: Settings
    # Resolves this process's plan (rocm_validate.node.resolve, handed in by the top-level plugin):
    # called once, on the first read, since discovery imports torch.
    resolve: Callable[[RunState], RunPlan]
    results: dict[str, TestResult] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)  # for the time used against the level's budget
    started_at: float = field(default_factory=time.time)  # the same moment, epoch: tests' start times are epoch
    worker_gpus: dict[str, int | None] = field(default_factory=dict)  # controller: each xdist worker's GPU, by id
    _plan: RunPlan | None = None

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
