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
* The controller resolves the run plan once (`node/plan.py`) and hands each worker, through
  `workerinput`, its whole-node part (`core.plan.NodePlan`: the devices as it found them, the
  visibility variables in force before pinning, each GPU's pinning), so a worker knows its GPU's
  index on the node and the collectives suite can pin its ranks to the whole selection.
* Each worker keeps its own work (`node/work.py`): every per-GPU test, the shared (stack-level)
  tests placed on its GPU, or in the beside lane (a second worker per GPU when the convergence
  suite runs) the convergence suite's training. The node-wide tests (the collectives, the pooled
  convergence verdicts) run once, on the first GPU's worker, after every worker has finished
  its own GPU's tests (`node/scheduling.py`), so no GEMM timing shares the node with an all_reduce.
* `-n` is set to the number of selected devices; a `-n` the user gave must match it. Beside
  lanes are workers beyond it.
* A usage error found while a worker collects (a marker's bad value, a named test the run's own
  selection leaves out) is handed to the controller (`core.outputs.stop_run`), which ends the run with it, exit
  status 4: pytest-xdist would report one raised in a worker as an internal error.
"""

from __future__ import annotations

from typing import Any

import pytest

from rocm_validate.core.options import DEVICE, Settings
from rocm_validate.core.outputs import USAGE_ERROR_KEY, outputs_of
from rocm_validate.core.plan import MAIN, NODE_GPU_VARIABLE
from rocm_validate.core.session import RunState, is_xdist_worker, run_state
from rocm_validate.core.suites import BESIDE_SUITES, NODE_WIDE_SUITES, TIMING_SUITES, suite_of_nodeid
from rocm_validate.errors import UsageError
from rocm_validate.node.budget import BUDGETS, describe_node_budget
from rocm_validate.node.facts import to_workerinput, worker_specs
from rocm_validate.node.plan import WORKERINPUT_KEY, needs_workers
from rocm_validate.node.work import LANE_VARIABLE

_XDIST_INSTALL = "pip install pytest-xdist (or pip install -e '.[test]')"


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
    state = run_state(config)
    state.pinned_workers, state.requested_workers = True, config.getoption("numprocesses")
    config.option.dist = "each"
    config.option.tx = ["popen"]


def start_controller(config: pytest.Config, state: RunState) -> None:
    """At session start, before the workers exist: the plan (the devices), and one pinned worker
    spec each."""
    plan = state.plan.node
    if plan is None or not plan.workers:
        return
    problem = worker_count_problem(state.requested_workers, len(plan.devices), state.settings.device.argument)
    if problem:
        raise UsageError(problem)
    config.option.tx = worker_specs(plan)


def header_lines(state: RunState) -> list[str]:
    """What a node run validates and how each GPU's worker is pinned."""
    plan = state.node
    if plan is None:
        return []
    devices, workers = plan.devices, plan.workers
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
    if workers and plan.beside:
        lines[0] += f", and a second beside it for the {', '.join(BESIDE_SUITES)} suite's training"
    if workers and set(NODE_WIDE_SUITES) & state.settings.suites:
        lines[0] += (
            f"; {', '.join(sorted(set(NODE_WIDE_SUITES) & state.settings.suites))} once, after them, on GPU {devices[0].index}'s worker"
        )
    if workers:
        level = state.settings.level
        budget = BUDGETS[level].seconds(len(devices), state.settings.suites)
        lines.append(f"rocm-validate node: level {describe_node_budget(level, len(devices), budget)}")
    for device, pinned in zip(devices, plan.pinnings, strict=True):
        ids = ", ".join(f"{k} {v}" for k, v in (("BDF", device.pci_bus_id), ("UUID", device.uuid)) if v)
        lines.append(f"rocm-validate node: GPU {device.index}{f' ({ids})' if ids else ''}: {device.name}; {pinned}")
    return lines


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
    """Controller: note the GPU each worker (`node`, as pytest-xdist names it; a replacement too)
    is pinned to, read once from its spec, and hand the worker the whole-node plan and its GPU."""
    state = run_state(node.config)
    if state.node is None:
        return
    value = node.gateway.spec.env.get(NODE_GPU_VARIABLE)
    gpu = None if value is None else int(value)
    state.worker_gpus[node.gateway.id] = gpu
    node.workerinput[WORKERINPUT_KEY] = to_workerinput(state.node, gpu)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Controller: count each worker's tests (xdist keeps only the last worker's count)."""
    run_state(node.config).collected[node.gateway.id] = len(ids)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """Controller: the run collected every worker's tests, so a worker left with none of its own
    (every shared test placed elsewhere) does not end the run as 'no tests collected'."""
    result = yield
    counts = run_state(session.config).collected
    if counts:
        session.testscollected = sum(counts.values())
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller: every test on every pinned worker; node-wide suites once, last, on the first GPU."""
    state = run_state(config)
    if state.node is None or not state.pinned_workers:
        return None
    from rocm_validate.node.scheduling import NodeScheduling

    def node_wide(nodeid: str) -> bool:
        return bool(config.hook.pytest_rocm_node_wide(config=config, nodeid=nodeid))

    def timing(nodeid: str) -> bool:
        return suite_of_nodeid(nodeid, config.rootpath) in TIMING_SUITES

    lead = str(state.node.devices[0].index)

    def role(worker: Any) -> tuple[str, str]:
        """(its GPU, its lane), from the map pytest_configure_node filled once and its spec's lane."""
        gpu = state.worker_gpus.get(worker.gateway.id)
        return (lead if gpu is None else str(gpu)), worker.gateway.spec.env.get(LANE_VARIABLE, MAIN)

    return NodeScheduling(config, log, node_wide, timing, role, lead)
