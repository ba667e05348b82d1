"""Which visibility variable pins a process to chosen GPUs, and to what value (pure, torch-free).

The GPU runtimes read their visibility variables once, when they initialise, in the process that
uses them; so a whole-node run decides here what each worker (and each collectives rank) must
see, and the variables are set in that process before it starts any GPU work.

The rules, in the order the runtimes apply them:

* ROCm: `ROCR_VISIBLE_DEVICES` filters the devices first (ROCr, below HIP); HIP then takes
  `HIP_VISIBLE_DEVICES` if it is set and not empty, else `CUDA_VISIBLE_DEVICES`, as indices (or
  UUIDs) into what ROCr left (ROCm clr, `rocdevice.cpp`: `HIP_VISIBLE_DEVICES[0] != '\\0' ?
  HIP_VISIBLE_DEVICES : CUDA_VISIBLE_DEVICES`). `GPU_DEVICE_ORDINAL` is OpenCL's, not HIP's.
* CUDA: `CUDA_VISIBLE_DEVICES` alone (indices, `GPU-<uuid>` or `MIG-<uuid>`); set but empty, no GPU.

A GPU's index in this project is torch's index in the process that chose it (the controller).
To pin a worker to GPU i, the worker gets the HIP-level (or CUDA) variable set to the i-th entry
of the list in force here, or to `i` when no list is set; `ROCR_VISIBLE_DEVICES` is inherited
unchanged, since the HIP-level entries index into what it leaves. MI300X partitions (CPX: 8
logical GPUs per package) are GPUs of that index space like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rocm_validate.errors import DeviceError

# The variable a worker is pinned with, per backend.
PIN_VARIABLE = {"rocm": "HIP_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}
# The variables whose list defines the GPU index space of this process, first one set wins.
_INDEX_SPACE = {"rocm": ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"), "cuda": ("CUDA_VISIBLE_DEVICES",)}


@dataclass(frozen=True)
class Pinning:
    """What a process must see to use exactly the GPUs `gpus` (indices as chosen here)."""

    gpus: tuple[int, ...]
    variable: str | None  # None: nothing to set (the CPU)
    value: str | None
    source: str | None = None  # 'HIP_VISIBLE_DEVICES=0,2,4,6' when the entries came from a list in force
    outer: str | None = None  # 'ROCR_VISIBLE_DEVICES=...' when ROCr filters below the pinned variable

    def env(self) -> dict[str, str]:
        """The variables to set in the pinned process."""
        return {} if self.variable is None or self.value is None else {self.variable: self.value}

    def describe(self) -> str:
        """'HIP_VISIBLE_DEVICES=6 (entries of HIP_VISIBLE_DEVICES=0,2,4,6; inside ROCR_VISIBLE_DEVICES=1-7)'."""
        if self.variable is None:
            return "no visibility variable (the CPU)"
        notes = []
        if self.source:
            notes.append(f"entries of {self.source}")
        if self.outer:
            notes.append(f"inside {self.outer}")
        return f"{self.variable}={self.value}" + (f" ({'; '.join(notes)})" if notes else "")


def split_entries(value: str) -> list[str]:
    """'0, 2,4' -> ['0', '2', '4']; '' -> []."""
    return [part.strip() for part in value.split(",") if part.strip()]


def index_space(backend: str, env: Mapping[str, str]) -> tuple[str | None, list[str] | None]:
    """The variable that lists this process's GPUs and its entries; (None, None) when no list is
    in force and GPU i is the runtime's device i."""
    for name in _INDEX_SPACE.get(backend, ()):
        value = env.get(name)
        if value is None:
            continue
        if backend == "rocm" and value.strip() == "":
            continue  # HIP treats an empty HIP_VISIBLE_DEVICES as unset
        return name, split_entries(value)
    return None, None


def pin(backend: str, gpus: Sequence[int], env: Mapping[str, str]) -> Pinning:
    """The pinning that makes a process see exactly `gpus`, in that order (its device i is gpus[i])."""
    chosen = tuple(gpus)
    variable = PIN_VARIABLE.get(backend)
    if variable is None:
        return Pinning(chosen, None, None)
    name, entries = index_space(backend, env)
    if name is None or entries is None:  # no list in force (index_space gives both or neither)
        values = [str(index) for index in chosen]
    else:
        outside = [index for index in chosen if not 0 <= index < len(entries)]
        if outside:
            raise DeviceError(
                f"GPU {', '.join(map(str, outside))} is not in {name}={env[name]} ({len(entries)} entries); "
                f"choose among 0..{len(entries) - 1}"
            )
        values = [entries[index] for index in chosen]
    rocr = env.get("ROCR_VISIBLE_DEVICES") if backend == "rocm" else None
    return Pinning(
        chosen,
        variable,
        ",".join(values),
        source=f"{name}={env[name]}" if name else None,
        outer=f"ROCR_VISIBLE_DEVICES={rocr}" if rocr is not None else None,
    )
