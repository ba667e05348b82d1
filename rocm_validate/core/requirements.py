"""Device-requirement markers, decided by pure functions that state need vs found."""

from __future__ import annotations

import re
from typing import Any, Sequence

from rocm_validate.errors import MarkerUsageError
from rocm_validate.platform.devices import DeviceInfo

MARKERS: dict[str, str] = {
    "rocm_suite(name)": "assign a test to a suite (correctness, perf, convergence) outside suites/<name>/",
    "requires_gpu": "skip unless the selected device is a GPU",
    "requires_arch(*prefixes)": "skip unless the device arch starts with one of the prefixes, e.g. 'gfx94', 'sm_90'",
    "requires_fp8(*formats)": "skip unless the device has native FP8 (optionally these formats, e.g. 'e4m3fnuz')",
    "requires_devices(n)": "skip unless at least n GPUs are visible",
    "requires_memory(gib)": "skip unless the selected device has at least gib GiB of memory",
}

_FULL_ARCH = re.compile(r"^(gfx9[0-9a-f]{2}|gfx1[0-9]{3}|sm_[0-9]{2,3}[a-z]?)$")



def _arch_display(prefix: str) -> str:
    """'gfx94' -> 'gfx94x'; full names stay as they are."""
    return prefix if _FULL_ARCH.match(prefix) else prefix + "x"


def _describe(device: DeviceInfo) -> str:
    return device.arch if device.is_gpu else f"cpu ({device.name})"


def requires_gpu(device: DeviceInfo) -> str | None:
    return None if device.is_gpu else f"needs a GPU, found {_describe(device)}"


def requires_arch(device: DeviceInfo, prefixes: Sequence[str]) -> str | None:
    if not prefixes or not all(isinstance(p, str) and p for p in prefixes):
        raise MarkerUsageError("requires_arch needs one or more arch prefixes, e.g. requires_arch('gfx94', 'gfx950')")
    if any(device.arch.lower().startswith(p.lower()) for p in prefixes):
        return None
    wanted = " or ".join(_arch_display(p) for p in prefixes)
    return f"needs {wanted}, found {_describe(device)}"


def requires_fp8(device: DeviceInfo, formats: Sequence[str]) -> str | None:
    have = set(device.fp8_formats)
    if not have:
        return f"needs native FP8, found none on {_describe(device)}"
    missing = [f for f in formats if f not in have]
    if missing:
        return f"needs FP8 {'/'.join(missing)}, found {'/'.join(device.fp8_formats)} on {_describe(device)}"
    return None


def requires_devices(devices: Sequence[DeviceInfo], count: Any) -> str | None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise MarkerUsageError(f"requires_devices needs a positive whole number of GPUs, found {count!r}")
    gpus = sum(1 for d in devices if d.is_gpu)
    return None if gpus >= count else f"needs {count} GPU{'s' if count > 1 else ''}, found {gpus}"


def requires_memory(device: DeviceInfo, gib: Any) -> str | None:
    if not isinstance(gib, (int, float)) or isinstance(gib, bool) or gib <= 0:
        raise MarkerUsageError(f"requires_memory needs a positive number of GiB, found {gib!r}")
    have = device.memory_gib
    if have is None:
        return f"needs {gib:g} GiB of device memory, found an unknown amount on {_describe(device)}"
    return None if have >= gib else f"needs {gib:g} GiB of device memory, found {have:.1f} GiB on {_describe(device)}"


def skip_reason(name: str, args: tuple[Any, ...], device: DeviceInfo, devices: Sequence[DeviceInfo]) -> str | None:
    """Why a test with marker `name(*args)` cannot run on `device`; None when it can."""
    if name == "requires_gpu":
        return requires_gpu(device)
    if name == "requires_arch":
        return requires_arch(device, args)
    if name == "requires_fp8":
        return requires_fp8(device, args)
    if name == "requires_devices":
        if len(args) != 1:
            raise MarkerUsageError(f"requires_devices takes one number, found {len(args)} arguments")
        return requires_devices(devices, args[0])
    if name == "requires_memory":
        if len(args) != 1:
            raise MarkerUsageError(f"requires_memory takes one number of GiB, found {len(args)} arguments")
        return requires_memory(device, args[0])
    return None


REQUIREMENT_MARKERS = ("requires_gpu", "requires_arch", "requires_fp8", "requires_devices", "requires_memory")
