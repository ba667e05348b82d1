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
* Each worker keeps its own work (`core/work.py`): every per-GPU test, the shared (stack-level)
  tests placed on its GPU, or in the beside lane (a second worker per GPU when the convergence
  suite runs) the convergence suite's training. The node-wide tests (the collectives, the pooled
  convergence verdicts) run once, on the first GPU's worker, after every worker has finished
  its own GPU's tests (`core/scheduling.py`), so no GEMM timing shares the node with an all_reduce.
* `-n` is set to the number of selected devices; a `-n` the user gave must match it. Beside
  lanes are workers beyond it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from rocm_validate.core.levels import LEVELS
from rocm_validate.core.options import DEVICE, NODE_WIDE_SUITES, Settings
from rocm_validate.core.pinning import Pinning, pin
from rocm_validate.core.session import is_xdist_worker, run_state
from rocm_validate.core.work import BESIDE, BESIDE_SUITES, LANE_VARIABLE, MAIN
from rocm_validate.errors import DeviceError, UsageError
from rocm_validate.platform.devices import VISIBILITY_VARIABLES, DeviceInfo
from rocm_validate.results.metrics import GpuRef

if TYPE_CHECKING:
    from rocm_validate.core.session import RunState

NODE_GPU_VARIABLE = "ROCM_VALIDATE_NODE_GPU"  # set in each pinned worker: its GPU's index on the node
WORKERINPUT_KEY = "rocm_validate_node"
DISCOVERY_TIMEOUT_S = 300  # vendor tools on a 64-partition node are slow; a hung driver is not
_DISCOVERY_MARK = "rocm-validate-devices:"
_DISCOVER = (
    "import json\n"
    "from rocm_validate.platform.devices import discover_devices\n"
    f"print({_DISCOVERY_MARK!r} + json.dumps([d.to_dict() for d in discover_devices()]))\n"
)
_XDIST_INSTALL = "pip install pytest-xdist (or pip install -e '.[test]')"
# Set when this run distributes over pinned workers: the -n the user gave, or None.
REQUESTED_WORKERS_KEY = pytest.StashKey["int | None"]()
# Controller: how many tests each worker collected (workers keep different work).
COLLECTED_KEY = pytest.StashKey["dict[str, int]"]()


@dataclass(frozen=True)
class NodeFacts:
    """A whole-node run as the controller set it up: the devices (GPUs, or the CPU once), the
    visibility variables in force before any pinning, and in a worker the GPU it is pinned to."""

    devices: tuple[DeviceInfo, ...]
    outer_env: tuple[tuple[str, str], ...] = ()
    gpu: int | None = None  # this worker's GPU index; None in the controller or for the CPU
    beside: bool = False  # each GPU has a beside lane (a second worker) for the convergence suite

    @property
    def backend(self) -> str:
        return self.devices[0].backend

    def pinning(self, gpus: tuple[int, ...]) -> Pinning:
        """What a process must see to use exactly `gpus` (as indexed here)."""
        return pin(self.backend, gpus, dict(self.outer_env))

    def gpu_ref(self, index: int) -> GpuRef | None:
        """The GPU with this index, as reports name it."""
        device = next((d for d in self.devices if d.is_gpu and d.index == index), None)
        return None if device is None else gpu_ref(device)

    @property
    def position(self) -> int:
        """This worker's GPU's place among the selected devices (0 in the controller)."""
        indices = [d.index for d in self.devices]
        return indices.index(self.gpu) if self.gpu in indices else 0

    def worker_spec(self, device: DeviceInfo, lane: str = MAIN) -> str:
        """The execnet spec of the worker that validates `device`: pinned to it on a GPU; the
        beside lane's worker carries the lane too."""
        if not device.is_gpu or device.index is None:
            return "popen"
        env = {**self.pinning((device.index,)).env(), NODE_GPU_VARIABLE: str(device.index)}
        if lane != MAIN:
            env[LANE_VARIABLE] = lane
        return "//".join(["popen", *(f"env:{name}={value}" for name, value in env.items())])

    def worker_specs(self) -> list[str]:
        """Every worker's spec: each device's main worker, then each GPU's beside worker."""
        beside = [self.worker_spec(d, BESIDE) for d in self.devices if self.beside and d.is_gpu]
        return [self.worker_spec(d) for d in self.devices] + beside

    def to_workerinput(self, gpu: int | None) -> dict[str, Any]:
        return {
            "devices": [d.to_dict() for d in self.devices],
            "outer_env": dict(self.outer_env),
            "gpu": gpu,
            "beside": self.beside,
        }

    @classmethod
    def from_workerinput(cls, data: Mapping[str, Any]) -> NodeFacts:
        return cls(
            tuple(DeviceInfo.from_dict(d) for d in data["devices"]),
            tuple(sorted(dict(data.get("outer_env") or {}).items())),
            data.get("gpu"),
            bool(data.get("beside", False)),
        )


def gpu_ref(device: DeviceInfo) -> GpuRef:
    return GpuRef(device.index if device.index is not None else -1, device.pci_bus_id, device.uuid, device.device_key)


def outer_visibility(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The visibility variables of `env`, kept before a worker's own pinning replaces them."""
    return tuple((name, env[name]) for name in VISIBILITY_VARIABLES if name in env)


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


def worker_count_problem(requested: object, devices: int, selection: str) -> str | None:
    """Why a user's -n cannot be used for this node run (None when it fits or was not given)."""
    if requested is None or requested == devices:
        return None
    return (
        f"{DEVICE.flag}={selection} runs one pytest-xdist worker per device ({devices} here), but -n {requested} "
        f"was given; leave -n out (it is set to {devices}) or select {requested} GPUs with {DEVICE.flag}=0,1,..."
    )


def pinned_device(devices: list[DeviceInfo], facts: NodeFacts) -> DeviceInfo:
    """The GPU a pinned worker validates: the only one its runtime shows. Any other count means
    the pinning did not take effect, which must stop the run rather than time the wrong GPU."""
    gpus = [d for d in devices if d.is_gpu]
    if len(gpus) == 1:
        return gpus[0]
    assert facts.gpu is not None
    pinning = facts.pinning((facts.gpu,)).describe()
    raise DeviceError(
        f"the worker pinned to GPU {facts.gpu} ({pinning}) sees {len(gpus)} GPUs instead of 1: the visibility "
        f"variable did not take effect (was the GPU runtime started before pytest, e.g. by sitecustomize?). "
        f"Validate that GPU alone with {DEVICE.flag}={facts.gpu}"
    )


def discover_in_child(env: Mapping[str, str] | None = None, timeout_s: float = DISCOVERY_TIMEOUT_S) -> list[DeviceInfo]:
    """Device discovery in a child process, so the calling process starts no GPU runtime."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DISCOVER],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(os.environ if env is None else env),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DeviceError(
            f"device discovery did not finish in {timeout_s:g} s (a hung driver or vendor tool?); "
            f"run `rocm-validate devices` to see which probe hangs"
        ) from None
    lines = [line for line in done.stdout.splitlines() if line.startswith(_DISCOVERY_MARK)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DeviceError(f"device discovery failed in its child process (exit {done.returncode}): {tail}")
    return [DeviceInfo.from_dict(d) for d in json.loads(lines[-1][len(_DISCOVERY_MARK) :])]


# --- wiring, called from the plugin's hooks ------------------------------------------------------


def configure_controller(config: pytest.Config, settings: Settings) -> None:
    """At configure time, before pytest-xdist decides whether to distribute: a node run with a
    per-GPU suite distributes with --dist each (the worker specs follow at session start, once
    the devices are known)."""
    if is_xdist_worker(config) or not settings.node_run or config.getoption("collectonly"):
        return
    if not needs_workers(settings) and not config.getoption("numprocesses", None):
        return
    selection = settings.device_argument()
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
    devices = state.node_devices()
    workers = REQUESTED_WORKERS_KEY in config.stash
    facts = NodeFacts(
        tuple(devices), outer_visibility(os.environ), beside=workers and beside_lanes(state.settings, devices)
    )
    state.node = facts
    if not workers:
        return
    problem = worker_count_problem(
        config.stash[REQUESTED_WORKERS_KEY], len(facts.devices), state.settings.device_argument()
    )
    if problem:
        raise UsageError(problem)
    config.option.tx = facts.worker_specs()


def worker_facts(config: pytest.Config) -> NodeFacts | None:
    """In a worker of a node run: the controller's facts, with this worker's GPU."""
    data = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
    return None if data is None else NodeFacts.from_workerinput(data)


def report_gpu(report: Any, state: RunState) -> GpuRef | None:
    """The GPU a report (from a worker, or xdist's report of a crashed one) belongs to."""
    node = getattr(report, "node", None)
    spec = getattr(getattr(node, "gateway", None), "spec", None)
    value = (getattr(spec, "env", None) or {}).get(NODE_GPU_VARIABLE)
    if value is None or state.node is None:
        return None
    return state.node.gpu_ref(int(value))


def header_lines(state: RunState, workers: bool) -> list[str]:
    """What a node run validates and how each GPU's worker is pinned."""
    facts = state.node
    if facts is None:
        return []
    devices = facts.devices
    if not devices[0].is_gpu:
        return [
            f"rocm-validate node: {DEVICE.flag}={state.settings.device_argument()} found no GPU; "
            "validating the CPU once"
        ]
    how = (
        "one pinned pytest-xdist worker each (--dist each)"
        if workers
        else "not distributed (collect-only, or node-wide suites only)"
    )
    lines = [f"rocm-validate node: {len(devices)} GPU{'s' if len(devices) > 1 else ''}, {how}"]
    if workers and facts.beside:
        lines[0] += f", and a second beside it for the {', '.join(BESIDE_SUITES)} suite's training"
    if workers and set(NODE_WIDE_SUITES) & state.settings.suites:
        lines[0] += (
            f"; {', '.join(sorted(set(NODE_WIDE_SUITES) & state.settings.suites))} once, after them, on GPU {devices[0].index}'s worker"
        )
    if workers:
        from rocm_validate.core.budget import NODE_BUDGETS
        from rocm_validate.core.levels import describe_node_budget

        level = state.settings.level
        budget = NODE_BUDGETS[level].seconds(len(devices), state.settings.suites)
        lines.append(f"rocm-validate node: level {describe_node_budget(level, len(devices), budget)}")
    for device in devices:
        assert device.index is not None
        ids = ", ".join(f"{k} {v}" for k, v in (("BDF", device.pci_bus_id), ("UUID", device.uuid)) if v)
        lines.append(
            f"rocm-validate node: GPU {device.index}{f' ({ids})' if ids else ''}: {device.name}; "
            f"{facts.pinning((device.index,)).describe()}"
        )
    return lines


# --- pytest-xdist hooks (optional: pytest-xdist may not be installed) ---------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: hand each worker the node's facts and its GPU."""
    state = run_state(node.config)
    if state.node is None:
        return
    value = node.gateway.spec.env.get(NODE_GPU_VARIABLE)
    node.workerinput[WORKERINPUT_KEY] = state.node.to_workerinput(None if value is None else int(value))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Controller: count each worker's tests (xdist keeps only the last worker's count)."""
    node.config.stash.setdefault(COLLECTED_KEY, {})[node.gateway.id] = len(ids)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """Controller: the run collected every worker's tests, so a worker left with none of its own
    (every shared test placed elsewhere) does not end the run as 'no tests collected'."""
    result = yield
    counts = session.config.stash.get(COLLECTED_KEY, {})
    if counts:
        session.testscollected = sum(counts.values())
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller: every test on every pinned worker; node-wide suites once, last, on the first GPU."""
    state = run_state(config)
    if state.node is None or REQUESTED_WORKERS_KEY not in config.stash:
        return None
    from rocm_validate.core.scheduling import NodeScheduling
    from rocm_validate.core.selection import suite_of_nodeid
    from rocm_validate.core.work import TIMING_SUITES

    def node_wide(nodeid: str) -> bool:
        return bool(config.hook.pytest_rocm_node_wide(config=config, nodeid=nodeid))

    def timing(nodeid: str) -> bool:
        return suite_of_nodeid(nodeid, config.rootpath) in TIMING_SUITES

    lead = str(state.node.devices[0].index)

    def role(worker: Any) -> tuple[str, str]:
        env = worker.gateway.spec.env
        return env.get(NODE_GPU_VARIABLE, lead), env.get(LANE_VARIABLE, MAIN)

    return NodeScheduling(config, log, node_wide, timing, role, lead)
