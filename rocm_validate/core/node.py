"""Whole-node runs (`--rocm-device=all` or a list such as `0,3,5`): every selected GPU validated in
one run, one pytest-xdist worker pinned to each.

How the pieces fit:

* The controller (the pytest process the user started) never initialises a GPU runtime: in a
  whole-node run it learns the devices from `discover_in_child`, the same discovery run in a
  short-lived child process whose JSON it reads, so it holds no GPU context for the whole run.
* Each worker is started from its own execnet spec, `popen//env:HIP_VISIBLE_DEVICES=3//env:
  ROCM_VALIDATE_NODE_GPU=3`. execnet sets those variables inside the worker process as its very
  first step, before the worker imports pytest, a conftest or torch, so the GPU runtime starts
  pinned (`pytest_configure_node` runs in the controller and can set nothing in a worker's
  environment; a spec's `env:` is applied by the worker itself). A worker that crashes is
  replaced from the same spec: the new one is pinned to the same GPU and takes over that GPU's
  remaining tests, and the crashed test is reported with that GPU.
* The controller also hands each worker, through `workerinput`, the devices as it found them and
  the visibility variables in force before pinning (`NodeFacts`), so a worker knows its GPU's
  index on the node and the collectives suite can pin its ranks to the whole selection.
* Tests run on every worker (pytest-xdist `--dist each`), except the node-wide suites
  (`collectives`): those run once, on the first GPU's worker, after every worker has finished
  its own GPU's tests (`core/scheduling.py`), so no GEMM timing shares the node with an all_reduce.
* `-n` is set to the number of selected devices; a `-n` the user gave must match it.
* A usage error found while a worker collects (a marker's bad value, a named test the run's own
  selection leaves out) is handed to the controller (`stop_run`), which ends the run with it, exit
  status 4: pytest-xdist would report one raised in a worker as an internal error.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from rocm_validate.core.node_facts import NODE_GPU_VARIABLE, NodeFacts, outer_visibility
from rocm_validate.core.options import DEVICE, Settings
from rocm_validate.core.outputs import outputs_of
from rocm_validate.core.session import RunState, is_xdist_worker, run_state
from rocm_validate.core.suites import NODE_WIDE_SUITES, suite_of_nodeid
from rocm_validate.errors import UsageError
from rocm_validate.results.metrics import GpuRef

WORKERINPUT_KEY = "rocm_validate_node"
USAGE_ERROR_KEY = "rocm_validate_usage_error"  # a worker's workeroutput: the usage error it found
_XDIST_INSTALL = "pip install pytest-xdist (or pip install -e '.[test]')"
# Set when this run distributes over pinned workers: the -n the user gave, or None.
REQUESTED_WORKERS_KEY = pytest.StashKey["int | None"]()


def needs_workers(settings: Settings) -> bool:
    """A whole-node run with a per-GPU suite selected runs one pinned worker per device; a run of
    node-wide suites alone (collectives) needs none: its ranks are processes of their own."""
    return settings.node_run and bool(settings.suites - set(NODE_WIDE_SUITES))


def worker_count_problem(requested: object, devices: int, selection: str) -> str | None:
    """Why a user's -n cannot be used for this node run (None when it fits or was not given)."""
    if requested is None or requested == devices:
        return None
    return (
        f"{DEVICE.flag}={selection} runs one pytest-xdist worker per device ({devices} here), but -n {requested} "
        f"was given; leave -n out (it is set to {devices}) or select {requested} GPUs with {DEVICE.flag}=0,1,..."
    )


# --- wiring, called from the plugin's hooks ------------------------------------------------------


def configure_controller(config: pytest.Config, settings: Settings) -> None:
    """At configure time, before pytest-xdist decides whether to distribute: a node run with a
    per-GPU suite distributes with --dist each (the worker specs follow at session start, once
    the devices are known)."""
    if is_xdist_worker(config) or not settings.node_run or config.getoption("collectonly"):
        return
    if not needs_workers(settings) and not config.getoption("numprocesses", None):
        return
    selection = settings.device.argument
    if not config.pluginmanager.hasplugin("xdist"):
        raise UsageError(
            f"{DEVICE.flag}={selection} runs one pytest-xdist worker per GPU; install it: {_XDIST_INSTALL}"
        )
    if config.getoption("numprocesses") == 0:
        raise UsageError(
            f"{DEVICE.flag}={selection} runs one pytest-xdist worker per GPU, but -n 0 turns workers off; "
            f"drop -n 0, or validate one GPU with {DEVICE.flag}=INDEX"
        )
    config.stash[REQUESTED_WORKERS_KEY] = config.getoption("numprocesses")
    config.option.dist = "each"
    config.option.tx = ["popen"]


def start_controller(config: pytest.Config, state: RunState) -> None:
    """At session start, before the workers exist: the devices, and one pinned worker spec each."""
    facts = NodeFacts(tuple(state.node_devices()), outer_visibility(os.environ))
    state.node = facts
    if REQUESTED_WORKERS_KEY not in config.stash:
        return
    problem = worker_count_problem(
        config.stash[REQUESTED_WORKERS_KEY], len(facts.devices), state.settings.device.argument
    )
    if problem:
        raise UsageError(problem)
    config.option.tx = [facts.worker_spec(device) for device in facts.devices]


def worker_facts(config: pytest.Config) -> NodeFacts | None:
    """In a worker of a node run: the controller's facts, with this worker's GPU."""
    data = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
    return None if data is None else NodeFacts.from_workerinput(data)


def report_gpu(report: Any, state: RunState) -> GpuRef | None:
    """The GPU a report (from a worker, or xdist's report of a crashed one) belongs to."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    index = state.worker_gpus.get(str(getattr(gateway, "id", "")))
    if index is None or state.node is None:
        return None
    return state.node.gpu_ref(index)


def header_lines(state: RunState, workers: bool) -> list[str]:
    """What a node run validates and how each GPU's worker is pinned."""
    facts = state.node
    if facts is None:
        return []
    devices = facts.devices
    if not devices[0].is_gpu:
        return [
            f"rocm-validate node: {DEVICE.flag}={state.settings.device.argument} found no GPU; validating the CPU once"
        ]
    how = (
        "one pinned pytest-xdist worker each (--dist each)"
        if workers
        else "not distributed (collect-only, or node-wide suites only)"
    )
    lines = [f"rocm-validate node: {len(devices)} GPU{'s' if len(devices) > 1 else ''}, {how}"]
    if workers and set(NODE_WIDE_SUITES) & state.settings.suites:
        lines[0] += (
            f"; {', '.join(sorted(set(NODE_WIDE_SUITES) & state.settings.suites))} once, after them, on GPU {devices[0].index}'s worker"
        )
    for device in devices:
        assert device.index is not None
        ids = ", ".join(f"{k} {v}" for k, v in (("BDF", device.pci_bus_id), ("UUID", device.uuid)) if v)
        lines.append(
            f"rocm-validate node: GPU {device.index}{f' ({ids})' if ids else ''}: {device.name}; "
            f"{facts.pinning((device.index,)).describe()}"
        )
    return lines


def stop_run(config: pytest.Config, problem: str) -> None:
    """A usage error found while collecting: raised in a plain run or the controller; in a
    pytest-xdist worker, handed to the controller (see the module's docstring)."""
    if not is_xdist_worker(config):
        raise UsageError(problem)
    config.workeroutput.setdefault(USAGE_ERROR_KEY, problem)  # type: ignore[attr-defined]  # set by pytest-xdist


# --- pytest-xdist hooks (optional: pytest-xdist may not be installed) ---------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Controller: a worker that found a usage error while collecting stops the run with it."""
    problem = getattr(node, "workeroutput", {}).get(USAGE_ERROR_KEY)
    found = outputs_of(node.config)
    if problem and found.stopped is None:
        found.stopped = problem


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: note the GPU each worker (a replacement too) is pinned to, read once from its
    spec, and hand the worker the node's facts and its GPU."""
    state = run_state(node.config)
    if state.node is None:
        return
    value = node.gateway.spec.env.get(NODE_GPU_VARIABLE)
    gpu = None if value is None else int(value)
    state.worker_gpus[node.gateway.id] = gpu
    node.workerinput[WORKERINPUT_KEY] = state.node.to_workerinput(gpu)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller: every test on every pinned worker; node-wide suites once, last, on the first GPU."""
    state = run_state(config)
    if state.node is None or REQUESTED_WORKERS_KEY not in config.stash:
        return None
    from rocm_validate.core.scheduling import NodeScheduling

    def node_wide(nodeid: str) -> bool:
        return suite_of_nodeid(nodeid, config.rootpath) in NODE_WIDE_SUITES

    lead = state.node.devices[0].index

    def is_lead(worker: Any) -> bool:
        return state.worker_gpus.get(worker.gateway.id) == lead

    return NodeScheduling(config, log, node_wide, is_lead)
