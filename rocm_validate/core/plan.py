"""The run plan: what this run validates, resolved once per process and read by every module that
needs it (pure, torch-free).

`RunPlan` holds the devices this process found, the devices the run validates (`--rocm-device`),
this process's own device (a pinned worker's GPU), the whole-node part (`NodePlan`: the
pinning, the lanes, this worker's GPU and lane) and the level's budget for this run. The
controller resolves it (`rocm_validate.node.resolve`) and hands a whole-node run's part to its
workers through pytest-xdist's `workerinput`; a worker reads its part from there, never
recomputing the selection. Core reads the plan; it never imports the whole-node machinery.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocm_validate.core.levels import minutes
from rocm_validate.platform.device_info import DeviceInfo
from rocm_validate.results.metrics import GpuRef

# Set in each pinned worker's environment by its execnet spec: its GPU's index on the node.
NODE_GPU_VARIABLE = "ROCM_VALIDATE_NODE_GPU"
MAIN, BESIDE = "main", "beside"  # a worker's lane in a whole-node run (rocm_validate.node.work)


def gpu_ref(device: DeviceInfo) -> GpuRef:
    """The GPU `device`, as reports name it."""
    return GpuRef(device.index if device.index is not None else -1, device.pci_bus_id, device.uuid, device.device_key)


@dataclass(frozen=True)
class NodePlan:
    """A whole-node run as the controller set it up: the devices (GPUs, or the CPU once), the
    visibility variables in force before any pinning, how each device's worker is pinned, and in
    a worker its GPU and lane."""

    devices: tuple[DeviceInfo, ...]
    outer_env: tuple[tuple[str, str], ...] = ()
    pinnings: tuple[str | None, ...] = ()  # per device: how its worker is pinned ('HIP_VISIBLE_DEVICES=3')
    workers: bool = False  # distributed over one pinned pytest-xdist worker per device
    beside: bool = False  # each GPU has a beside lane (a second worker) for the convergence suite
    gpu: int | None = None  # this worker's GPU index; None in the controller or for the CPU
    lane: str = MAIN  # this worker's lane

    @property
    def backend(self) -> str:
        return self.devices[0].backend

    @property
    def gpus(self) -> list[int]:
        """The selected GPUs' indices (none when the run validates the CPU)."""
        return [d.index for d in self.devices if d.is_gpu and d.index is not None]

    def gpu_ref(self, index: int) -> GpuRef | None:
        """The GPU with this index, as reports name it."""
        device = next((d for d in self.devices if d.is_gpu and d.index == index), None)
        return None if device is None else gpu_ref(device)

    @property
    def position(self) -> int:
        """This worker's GPU's place among the selected devices (0 in the controller)."""
        indices = [d.index for d in self.devices]
        return indices.index(self.gpu) if self.gpu in indices else 0


@dataclass(frozen=True)
class RunBudget:
    """The level's budget for this run: on one device, or for a node's GPUs (`gpus` > 0, a
    whole-node run with pinned workers), and the header's line that states it."""

    level: str
    seconds: float
    gpus: int  # the GPUs of a whole-node run with pinned workers; 0 for one device
    header: str  # 'standard: budget 10 min on one GPU; per-test timeout 300-420 s by suite'

    def used(self, used_s: float) -> str:
        """'standard: 5 min 12 s of its 10 min budget' (for 2 GPUs, and OVER when it ran longer)."""
        where = f" for {self.gpus} GPUs" if self.gpus else ""
        over = " OVER the budget" if used_s > self.seconds else ""
        return f"{self.level}: {minutes(used_s)} of its {minutes(self.seconds)} budget{where}{over}"


@dataclass(frozen=True)
class RunPlan:
    """What this process validates, resolved once (see the module's docstring)."""

    found: tuple[DeviceInfo, ...]  # every device this process discovered, ending with the CPU
    devices: tuple[DeviceInfo, ...]  # the devices the run validates (--rocm-device)
    device: DeviceInfo  # this process's device: a pinned worker's own GPU, else the first selected
    budget: RunBudget
    node: NodePlan | None = None  # a whole-node run (--rocm-device=all or a list)
