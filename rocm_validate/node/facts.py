"""The facts of a whole-node run, free of pytest state: the selected devices and the visibility
variables in force before pinning (`NodeFacts`, handed from the controller to every worker), the
GPU a pinned worker must see, and device discovery in a child process so the controller starts
no GPU runtime. `node/workers.py` wires them into pytest and pytest-xdist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocm_validate.core.options import DEVICE
from rocm_validate.errors import DeviceError
from rocm_validate.node.pinning import Pinning, pin
from rocm_validate.node.work import BESIDE, LANE_VARIABLE, MAIN
from rocm_validate.platform.devices import VISIBILITY_VARIABLES, DeviceInfo
from rocm_validate.results.metrics import GpuRef

NODE_GPU_VARIABLE = "ROCM_VALIDATE_NODE_GPU"  # set in each pinned worker: its GPU's index on the node
DISCOVERY_TIMEOUT_S = 300  # vendor tools on a 64-partition node are slow; a hung driver is not
_DISCOVERY_MARK = "rocm-validate-devices:"
_DISCOVER = (
    "import json\n"
    "from rocm_validate.platform.devices import discover_devices\n"
    f"print({_DISCOVERY_MARK!r} + json.dumps([d.to_dict() for d in discover_devices()]))\n"
)


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
