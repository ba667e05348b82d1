"""Which devices a run validates: `--rocm-device` parsed once into a `DeviceSelection`, and the
devices it picks from the discovered ones (pure, torch-free).

A selection is one of five kinds: automatic (GPU 0, else the CPU), the CPU, one GPU index, every
GPU, or a list of GPU indices; the last two make a whole-node run (one pinned worker per GPU).
Picking never falls back to the CPU silently when a GPU was asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rocm_validate.errors import DeviceError, UsageError
from rocm_validate.platform.device_info import DeviceInfo
from rocm_validate.platform.tool_failures import NO_GPU_TOOLS

__all__ = ["DeviceSelection", "select_device", "select_devices"]

OPTION = "--rocm-device"
Kind = Literal["auto", "cpu", "gpu", "all", "list"]
_WORDS: dict[str, Kind] = {"auto": "auto", "cpu": "cpu", "all": "all"}
FORMS = "a GPU index (0, 1, ...), a comma list of indices (0,3,5), 'all', 'cpu' or 'auto'"
# Variables that choose GPUs: when one is set, the user meant a GPU run.
GPU_SELECTING_VARIABLES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


@dataclass(frozen=True)
class DeviceSelection:
    """What `--rocm-device` (or its twins) asked for, and where that came from."""

    kind: Kind = "auto"
    indices: tuple[int, ...] = ()  # the GPU index ('gpu') or the listed indices ('list')
    source: str = OPTION  # the option or variable that chose it, named in messages

    @classmethod
    def parse(cls, value: str, source: str = OPTION) -> DeviceSelection:
        """'0' -> one GPU, 'cpu', 'auto', 'all', '0,3,5' -> a list; UsageError naming the accepted forms."""
        name = source.removesuffix(" (environment)").removesuffix(" (ini)")
        text = value.strip().lower()
        if text in _WORDS:
            return cls(_WORDS[text], (), name)
        if "," in text:
            parts = [part.strip() for part in text.split(",")]
            indices = [_gpu_index(part) for part in parts]
            bad = [p for p, i in zip(parts, indices) if i is None]
            if bad:
                raise UsageError(
                    f"{source}={value!r}: {', '.join(map(repr, bad))} is not a GPU index; expected {FORMS}, "
                    f"e.g. {OPTION}=0,1"
                )
            found = [i for i in indices if i is not None]
            repeated = sorted({i for i in found if found.count(i) > 1})
            if repeated:
                raise UsageError(
                    f"{source}={value!r}: GPU {', '.join(map(str, repeated))} is listed twice; name each GPU once"
                )
            return cls("list", tuple(found), name)
        index = _gpu_index(text)
        if index is None:
            raise UsageError(f"{source}={value!r}: expected {FORMS}, e.g. {OPTION}=0")
        return cls("gpu", (index,), name)

    @property
    def node_run(self) -> bool:
        """Every GPU, or a list: every selected GPU validated, one pinned worker each."""
        return self.kind in ("all", "list")

    @property
    def index(self) -> int | None:
        """The one GPU index asked for, else None."""
        return self.indices[0] if self.kind == "gpu" else None

    @property
    def argument(self) -> str:
        """The --rocm-device value that repeats this choice: 'auto', 'cpu', '3', 'all', '0,3,5'."""
        return ",".join(map(str, self.indices)) if self.kind in ("gpu", "list") else self.kind

    def named_gpus(self) -> str | None:
        """'--rocm-device=3 names a GPU' when the selection itself asks for GPUs by index."""
        if self.kind == "gpu":
            return f"{self.source}={self.argument} names a GPU"
        if self.kind == "list":
            return f"{self.source}={self.argument} names GPUs"
        return None


def _gpu_index(text: str) -> int | None:
    """'3', 'cuda:3', 'hip:3' -> 3; anything else -> None."""
    for prefix in ("cuda:", "hip:", "rocm:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return int(text) if text.isdigit() else None


def gpu_expected(wanted: DeviceSelection, env: Mapping[str, str], cpu: DeviceInfo) -> str | None:
    """Why this run must validate a GPU (the option or variable the user set, or a GPU build of
    torch), or None when validating the CPU is what was asked for."""
    if wanted.kind == "cpu":
        return None
    named = wanted.named_gpus()
    if named:
        return named
    chosen = [f"{name}={env[name]}" for name in GPU_SELECTING_VARIABLES if env.get(name)]
    if chosen:
        return f"{chosen[0]} is set"
    if cpu.runtime_version:
        return f"this torch is a GPU build ({cpu.runtime_version})"
    return None


def select_device(
    devices: list[DeviceInfo], wanted: DeviceSelection = DeviceSelection(), env: Mapping[str, str] | None = None
) -> DeviceInfo:
    """The device a run validates: an index, the CPU, or (automatic) the first GPU else the CPU.

    Never falls back to the CPU silently: when a GPU was asked for (an index, a visibility
    variable in `env`, or a GPU build of torch) and none is usable, raises DeviceError saying
    what torch reported and that --rocm-device=cpu validates the CPU on purpose.
    """
    gpus = [d for d in devices if d.is_gpu]
    cpu = next(d for d in devices if not d.is_gpu)
    if wanted.kind == "cpu":
        return cpu
    if not gpus:
        expected = gpu_expected(wanted, env or {}, cpu)
        if expected:
            build = f"torch {cpu.torch_version or 'unknown'}"
            reported = "; ".join(e for e in cpu.errors if e.startswith(("torch", *NO_GPU_TOOLS))) or (
                f"{build} found none" if cpu.runtime_version else f"{build} is a CPU-only build"
            )
            raise DeviceError(
                f"{expected}, but no usable GPU was found ({reported}). Fix the driver, the container's device "
                f"access or the visibility variables, or validate the CPU on purpose with {OPTION}=cpu"
            )
        return cpu
    if wanted.kind != "gpu":
        return gpus[0]
    match = next((d for d in gpus if d.index == wanted.index), None)
    if match is None:
        found = ", ".join(f"{d.index} ({d.name})" for d in gpus)
        raise DeviceError(
            f"{wanted.source}={wanted.argument}: no such GPU; found {found}. Use one of those indices or 'cpu'."
        )
    return match


def select_devices(
    devices: list[DeviceInfo], wanted: DeviceSelection, env: Mapping[str, str] | None = None
) -> list[DeviceInfo]:
    """The devices a run validates: for a whole-node run every GPU, or the listed indices in that
    order; else the one device `select_device` picks.

    With no GPU at all, every GPU is the CPU, once, unless a GPU was expected (a visibility variable
    in `env`, a GPU build of torch): then it is the same DeviceError as for a single index. A
    listed index that does not exist raises DeviceError naming it and the GPUs there are.
    """
    gpus = [d for d in devices if d.is_gpu]
    if not wanted.node_run or not gpus:
        return [select_device(devices, wanted, env)]
    if wanted.kind == "all":
        return gpus
    by_index = {d.index: d for d in gpus}
    missing = [index for index in wanted.indices if index not in by_index]
    if missing:
        found = ", ".join(f"{d.index} ({d.name})" for d in gpus)
        raise DeviceError(
            f"{wanted.source}={wanted.argument}: no GPU {', '.join(map(str, missing))}; found {len(gpus)}: {found}. "
            f"List only those indices, or use {wanted.source}=all."
        )
    return [by_index[index] for index in wanted.indices]
