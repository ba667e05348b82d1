"""The facts of a whole-node run, free of pytest state: the controller's whole-node plan (the
selected devices, the visibility variables in force before pinning, each worker's pinning and
execnet spec; `core.plan.NodePlan`, handed to every worker through `workerinput`), the GPU a
pinned worker must see, and device discovery in a child process so the controller starts no GPU
runtime. `node/plan.py` resolves the run plan with them; `node/workers.py` wires them into pytest
and pytest-xdist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rocm_validate.core.options import DEVICE
from rocm_validate.core.plan import BESIDE, MAIN, NODE_GPU_VARIABLE, NodePlan
from rocm_validate.errors import DeviceError
from rocm_validate.node.pinning import Pinning, pin
from rocm_validate.node.work import LANE_VARIABLE
from rocm_validate.platform.devices import VISIBILITY_VARIABLES, DeviceInfo

DISCOVERY_TIMEOUT_S = 300  # vendor tools on a 64-partition node are slow; a hung driver is not
_DISCOVERY_MARK = "rocm-validate-devices:"
_DISCOVER = (
    "import json\n"
    "from rocm_validate.platform.devices import discover_devices\n"
    f"print({_DISCOVERY_MARK!r} + json.dumps([d.to_dict() for d in discover_devices()]))\n"
)


def node_plan(
    devices: tuple[DeviceInfo, ...], outer_env: tuple[tuple[str, str], ...], workers: bool, beside: bool
) -> NodePlan:
    """The controller's whole-node plan: the devices, and how each GPU's worker is pinned."""
    plan = NodePlan(devices, outer_env, workers=workers, beside=beside)
    return replace(plan, pinnings=tuple(_described(plan, d) for d in devices))


def _described(plan: NodePlan, device: DeviceInfo) -> str | None:
    return pinning(plan, (device.index,)).describe() if device.is_gpu and device.index is not None else None


def pinning(plan: NodePlan, gpus: tuple[int, ...]) -> Pinning:
    """What a process must see to use exactly `gpus` (as indexed in the controller)."""
    return pin(plan.backend, gpus, dict(plan.outer_env))


def worker_spec(plan: NodePlan, device: DeviceInfo, lane: str = MAIN) -> str:
    """The execnet spec of the worker that validates `device`: pinned to it on a GPU; the beside
    lane's worker carries the lane too."""
    if not device.is_gpu or device.index is None:
        return "popen"
    env = {**pinning(plan, (device.index,)).env(), NODE_GPU_VARIABLE: str(device.index)}
    if lane != MAIN:
        env[LANE_VARIABLE] = lane
    return "//".join(["popen", *(f"env:{name}={value}" for name, value in env.items())])


def worker_specs(plan: NodePlan) -> list[str]:
    """Every worker's spec: each device's main worker, then each GPU's beside worker."""
    beside = [worker_spec(plan, d, BESIDE) for d in plan.devices if plan.beside and d.is_gpu]
    return [worker_spec(plan, d) for d in plan.devices] + beside


def to_workerinput(plan: NodePlan, gpu: int | None) -> dict[str, Any]:
    """What the controller hands the worker pinned to `gpu` (JSON-able: execnet carries it)."""
    return {
        "devices": [d.to_dict() for d in plan.devices],
        "outer_env": dict(plan.outer_env),
        "pinnings": list(plan.pinnings),
        "workers": plan.workers,
        "gpu": gpu,
        "beside": plan.beside,
    }


def from_workerinput(data: Mapping[str, Any], lane: str) -> NodePlan:
    """A worker's part of the plan, as its controller handed it (`lane`: from its spec's environment)."""
    return NodePlan(
        tuple(DeviceInfo.from_dict(d) for d in data["devices"]),
        tuple(sorted(dict(data.get("outer_env") or {}).items())),
        tuple(data.get("pinnings") or ()),
        bool(data.get("workers", True)),
        bool(data.get("beside", False)),
        data.get("gpu"),
        lane,
    )


def outer_visibility(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The visibility variables of `env`, kept before a worker's own pinning replaces them."""
    return tuple((name, env[name]) for name in VISIBILITY_VARIABLES if name in env)


def pinned_device(devices: list[DeviceInfo], plan: NodePlan) -> DeviceInfo:
    """The GPU a pinned worker validates: the only one its runtime shows. Any other count means
    the pinning did not take effect, which must stop the run rather than time the wrong GPU."""
    gpus = [d for d in devices if d.is_gpu]
    if len(gpus) == 1:
        return gpus[0]
    assert plan.gpu is not None
    pinned = pinning(plan, (plan.gpu,)).describe()
    raise DeviceError(
        f"the worker pinned to GPU {plan.gpu} ({pinned}) sees {len(gpus)} GPUs instead of 1: the visibility "
        f"variable did not take effect (was the GPU runtime started before pytest, e.g. by sitecustomize?). "
        f"Validate that GPU alone with {DEVICE.flag}={plan.gpu}"
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
