"""Per-run state kept in `config.stash`: settings, discovered devices, results and metrics."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from rocm_validate.core.options import Settings
from rocm_validate.errors import UsageError

if TYPE_CHECKING:
    from rocm_validate.node.facts import NodeFacts
    from rocm_validate.platform.devices import DeviceInfo
    from rocm_validate.results.metrics import Metric
    from rocm_validate.results.report import TestResult


@dataclass
class RunState:
    """Everything the plugin remembers about one pytest run (one per process under xdist)."""

    config: pytest.Config
    settings: Settings
    results: dict[str, TestResult] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)  # for the time used against the level's budget
    started_at: float = field(default_factory=time.time)  # the same moment, epoch: tests' start times are epoch
    node: NodeFacts | None = None  # a whole-node run's devices (and, in a worker, its pinned GPU)
    worker_gpus: dict[str, int | None] = field(default_factory=dict)  # controller: each xdist worker's GPU, by id
    _devices: list[DeviceInfo] | None = None

    def devices(self) -> list[DeviceInfo]:
        """All devices, probed once per process (imports torch on first call). The main process
        of a whole-node run probes in a child process, so it never starts a GPU runtime itself."""
        if self._devices is None:
            found = self.config.hook.pytest_rocm_discover_devices(config=self.config)
            if found is None and self.settings.node_run and not is_xdist_worker(self.config):
                from rocm_validate.node.facts import discover_in_child

                found = discover_in_child()
            elif found is None:
                from rocm_validate.platform.devices import discover_devices

                found = discover_devices()
            if not found or found[-1].is_gpu:
                raise UsageError("device discovery must return a list that ends with the CPU device")
            self._devices = list(found)
        return self._devices

    @property
    def discovered(self) -> bool:
        return self._devices is not None

    def device(self) -> DeviceInfo:
        """The device this run validates (--rocm-device); a missing index is a usage error. In a
        whole-node run: a pinned worker's own GPU, elsewhere the first selected device."""
        from rocm_validate.platform.selection import select_device

        if not self.settings.node_run:
            return select_device(self.devices(), self.settings.device, os.environ)
        if self.node is not None and self.node.gpu is not None:
            from rocm_validate.node.facts import pinned_device

            return pinned_device(self.devices(), self.node)
        return self.node_devices()[0]

    def node_devices(self) -> list[DeviceInfo]:
        """Every device this run validates: the selected GPUs of a whole-node run (as the
        controller found them, also in a worker), else the one selected device."""
        if self.node is not None:
            return list(self.node.devices)
        if not self.settings.node_run:
            return [self.device()]
        from rocm_validate.platform.selection import select_devices

        return select_devices(self.devices(), self.settings.device, os.environ)

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
