"""Resolves the run plan (`core.plan.RunPlan`) once per process: discovery, the devices
`--rocm-device` selects, this process's device, a whole-node run's pinning and lanes, and the
level's budget. The top-level plugin hands `resolve` to the run state, which calls it on the
first read (discovery imports torch).

* A plain run (and each worker of a plain `-n` run): discovery here, one device selected.
* The controller of a whole-node run: discovery in a child process (it never starts a GPU
  runtime), the selected devices, each GPU's pinning and whether it has a beside lane.
* A worker of a whole-node run: the controller's whole-node plan from `workerinput`, and its own
  GPU, the only one its pinned runtime shows (discovery here).
"""

from __future__ import annotations

import os

import pytest

from rocm_validate.core.levels import LEVELS
from rocm_validate.core.options import Settings
from rocm_validate.core.plan import MAIN, NodePlan, RunBudget, RunPlan
from rocm_validate.core.session import RunState, is_xdist_worker
from rocm_validate.core.suites import BESIDE_SUITES, NODE_WIDE_SUITES
from rocm_validate.errors import UsageError
from rocm_validate.node.budget import run_budget
from rocm_validate.node.facts import discover_in_child, from_workerinput, node_plan, outer_visibility, pinned_device
from rocm_validate.node.work import LANE_VARIABLE
from rocm_validate.platform.device_info import DeviceInfo

WORKERINPUT_KEY = "rocm_validate_node"  # a worker's workerinput: the controller's whole-node plan, its GPU


def resolve(state: RunState) -> RunPlan:
    """This process's plan (see the module's docstring)."""
    settings = state.settings
    handed = worker_part(state.config)
    if handed is not None:
        found = _discover(state, in_child=False)
        device = pinned_device(found, handed) if handed.gpu is not None else handed.devices[0]
        return RunPlan(tuple(found), handed.devices, device, _budget(state, device, handed), handed)
    if not settings.node_run:
        from rocm_validate.platform.selection import select_device

        found = _discover(state, in_child=False)
        device = select_device(found, settings.device, os.environ)
        return RunPlan(tuple(found), (device,), device, _budget(state, device, None))
    from rocm_validate.platform.selection import select_devices

    controller = not is_xdist_worker(state.config)
    found = _discover(state, in_child=controller)
    devices = tuple(select_devices(found, settings.device, os.environ))
    whole_node = None
    if controller:
        workers = state.pinned_workers
        beside = workers and beside_lanes(settings, list(devices))
        whole_node = node_plan(devices, outer_visibility(os.environ), workers, beside)
    return RunPlan(tuple(found), devices, devices[0], _budget(state, devices[0], whole_node), whole_node)


def worker_part(config: pytest.Config) -> NodePlan | None:
    """In a worker of a whole-node run: the controller's whole-node plan, with this worker's GPU
    and lane (read from workerinput, no discovery); None elsewhere."""
    data = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
    return None if data is None else from_workerinput(data, os.environ.get(LANE_VARIABLE, MAIN))


def _discover(state: RunState, in_child: bool) -> list[DeviceInfo]:
    """Every device this process can use, ending with the CPU: a conftest's
    `pytest_rocm_discover_devices` first, else discovery here or (`in_child`) in a child process."""
    found = state.config.hook.pytest_rocm_discover_devices(config=state.config)
    if found is None and in_child:
        found = discover_in_child()
    elif found is None:
        from rocm_validate.platform.devices import discover_devices

        found = discover_devices()
    if not found or found[-1].is_gpu:
        raise UsageError("device discovery must return a list that ends with the CPU device")
    return list(found)


def needs_workers(settings: Settings) -> bool:
    """A whole-node run with a per-GPU suite selected runs one pinned worker per device; a run of
    node-wide suites alone (collectives) needs none: its ranks are processes of their own."""
    return settings.node_run and bool(settings.suites - set(NODE_WIDE_SUITES))


def beside_lanes(settings: Settings, devices: list[DeviceInfo]) -> bool:
    """Whether each GPU gets a beside lane: a node run of two or more GPUs with a beside suite
    (convergence) selected, below the extended level (whose sustained-load checks want the GPU
    alone and a pattern over most of its memory)."""
    gpus = [d for d in devices if d.is_gpu]
    return (
        needs_workers(settings)
        and len(gpus) >= 2
        and bool(set(BESIDE_SUITES) & settings.suites)
        and LEVELS.index(settings.level) < LEVELS.index("extended")
    )


def _budget(state: RunState, device: DeviceInfo, whole_node: NodePlan | None) -> RunBudget:
    settings = state.settings
    pinned = whole_node is not None and whole_node.workers and len(whole_node.gpus) >= 2
    gpus = len(whole_node.devices) if whole_node is not None and pinned else 0
    return run_budget(settings.level, settings.suites, device, gpus, settings.timeout_s)
