"""Every reason a test cannot run here, stated as need vs found ("needs gfx94x, found sm_90").

The requirement markers (`requires_gpu`, `requires_arch`, ...) and the needs more than one suite
shares (`_scaled_mm` with a scaling, FP8 formats, an FP8 recipe, an optional library, a backend's
refusal) are decided here, from a `DeviceInfo` and the platform rules of
`rocm_validate.platform.capabilities`, so one need is always worded one way. A need only one suite
has lives with that suite (an SDPA backend, a BLAS choice and a block's CPU limit in correctness/)
and words its found side with `device_label`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

import pytest

from rocm_validate.errors import LibraryMissing, MarkerUsageError
from rocm_validate.platform import capabilities, probes
from rocm_validate.platform.devices import DeviceInfo

__all__ = ["MARKERS", "NotValidated", "not_validated"]
MARKERS: dict[str, str] = {
    "rocm_suite(name)": "assign a test to a suite (preflight, correctness, perf, convergence) outside suites/<name>/",
    "rocm_level(level)": "the lowest level the test runs at: quick, standard (the default) or extended",
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


def device_label(device: DeviceInfo) -> str:
    """What a skip reason says it found: the arch of a GPU, 'cpu (<name>)' otherwise."""
    return device.arch if device.is_gpu else f"cpu ({device.name})"


def requires_gpu(device: DeviceInfo) -> str | None:
    return None if device.is_gpu else f"needs a GPU, found {device_label(device)}"


def requires_arch(device: DeviceInfo, prefixes: Sequence[str]) -> str | None:
    if not prefixes or not all(isinstance(p, str) and p for p in prefixes):
        raise MarkerUsageError("requires_arch needs one or more arch prefixes, e.g. requires_arch('gfx94', 'gfx950')")
    if any(device.arch.lower().startswith(p.lower()) for p in prefixes):
        return None
    wanted = " or ".join(_arch_display(p) for p in prefixes)
    return f"needs {wanted}, found {device_label(device)}"


def fp8_skip_reason(device: DeviceInfo) -> str | None:
    """Why FP8 cannot be checked at all: the device computes no FP8 format natively."""
    return None if device.fp8_formats else f"needs native FP8, found none on {device_label(device)}"


def requires_fp8(device: DeviceInfo, formats: Sequence[str]) -> str | None:
    have = set(device.fp8_formats)
    if not have:
        return fp8_skip_reason(device)
    missing = [f for f in formats if f not in have]
    if missing:
        return f"needs FP8 {'/'.join(missing)}, found {'/'.join(device.fp8_formats)} on {device_label(device)}"
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
        return f"needs {gib:g} GiB of device memory, found an unknown amount on {device_label(device)}"
    return (
        None if have >= gib else f"needs {gib:g} GiB of device memory, found {have:.1f} GiB on {device_label(device)}"
    )


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


# --- the checks' own needs -------------------------------------------------------------------


_SCALING_NAMES = {"tensorwise": "tensor-wise", "rowwise": "row-wise"}


def scaled_mm_skip_reason(device: DeviceInfo, scaling: str = "tensorwise", out_dtype: str = "bfloat16") -> str | None:
    """Why torch._scaled_mm with this scaling and output cannot be checked here; None when it can.

    The device's own answer decides where this process drives it (`probes.scaled_mm_probe`: one
    16x16x16 call per device and scaling, any exception a refusal); elsewhere the version rule
    of `capabilities.scaled_mm_supported` does.
    """
    where = device_label(device)
    if not device.fp8_formats:
        return fp8_skip_reason(device)
    probe = probes.scaled_mm_probe(device, scaling)
    if probe is not None and not probe.supported:
        return (
            f"needs {_SCALING_NAMES.get(scaling, scaling)} torch._scaled_mm, found {where} refuses it "
            f"({probe.refusal}; torch {device.torch_version}, runtime {device.runtime_version})"
        )
    if probe is None:
        rule_reason = _scaled_mm_rule_reason(device, scaling, where)
        if rule_reason:
            return rule_reason
    allowed = capabilities.scaled_mm_out_dtypes(device.backend, scaling)
    if out_dtype not in allowed:
        return (
            f"needs {out_dtype} output from {scaling} _scaled_mm, found only {', '.join(allowed)} on {device.backend}"
        )
    return None


def _scaled_mm_rule_reason(device: DeviceInfo, scaling: str, where: str) -> str | None:
    """The version rule's reason, for a device this process cannot probe."""
    if not device.scaled_mm:
        return f"needs torch._scaled_mm (gfx942, gfx950 on ROCm 6.5+, gfx12 on ROCm 6.3+, sm_89+), found {where}"
    if not capabilities.scaled_mm_supported(
        device.backend, device.arch, device.runtime_version, scaling, device.torch_version
    ):
        return (
            f"needs row-wise _scaled_mm (sm_90+, gfx942/gfx950 with ROCm 6.4+ and torch 2.7+, CPU), found {where} "
            f"(runtime {device.runtime_version}, torch {device.torch_version})"
        )
    return None


def library_skip_reason(missing: LibraryMissing, purpose: str) -> str:
    """An optional library (apex, torchao, Transformer Engine) that is not installed."""
    install = f"; install it with: {missing.install}" if missing.install else ""
    return f"needs {missing.package} to {purpose}, found it not installed{install}"


def import_optional(module: str, purpose: str, install: str = "") -> Any:
    """Import an optional library for a check: skip when it is not installed (need vs found, with
    the command that installs it); fail when it is installed but breaks on import, since a
    broken install on a node is what the suite is there to find."""
    from rocm_validate.platform.libraries import import_library

    __tracebackhide__ = True
    try:
        return import_library(module, install)
    except LibraryMissing as missing:
        pytest.skip(library_skip_reason(missing, purpose))
    except Exception as exc:
        pytest.fail(f"{module} is installed but cannot be imported: {type(exc).__name__}: {exc}", pytrace=False)


def refusal_skip_reason(what: str, refusal: BaseException) -> str:
    """A backend or library that declined the case (`errors.PlatformRefusal`)."""
    return f"needs {what}, found it refuses: {refusal}"


class NotValidated(pytest.skip.Exception):  # type: ignore[name-defined]  # pytest's documented alias of Skipped
    """A skip that leaves a check this platform should support unvalidated: no baseline, no RCP,
    a backend or library refusing a case it supports. A skip normally; a failure under
    --rocm-strict, as its `category` (a missing baseline is the run's configuration; unset, a
    refusal of the stack: environment) with its `fix` in the verdict. Platform limits (no GPU,
    another arch, no FP8, a library not installed) are plain skips and stay skips under --rocm-strict."""

    def __init__(self, reason: str, category: str | None = None, fix: str | None = None) -> None:
        super().__init__(msg=reason)
        self.category = category
        self.fix = fix


def not_validated(reason: str, category: str | None = None, fix: str | None = None) -> NoReturn:
    """Skip the test as not validated (see NotValidated); `category` and `fix` say, under
    --rocm-strict, what kind of failure it is and what to do."""
    __tracebackhide__ = True
    raise NotValidated(reason, category, fix)


class Fp8Needs(Protocol):
    """What an FP8 training recipe needs of a device (`workloads.fp8_recipes.Fp8Recipe` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def needs_gpu(self) -> bool: ...
    @property
    def archs(self) -> tuple[str, ...]: ...
    @property
    def scaling(self) -> str: ...


def fp8_recipe_skip_reason(device: DeviceInfo, recipe: Fp8Needs) -> str | None:
    """Why an FP8 training recipe cannot run on `device`: no native FP8, no GPU for a GPU-only
    library, not an arch the recipe is limited to (MXFP8), or no `_scaled_mm` with its scaling."""
    reason = fp8_skip_reason(device)
    if reason is None and recipe.needs_gpu:
        reason = requires_gpu(device)
    if reason is None and recipe.archs:
        reason = requires_arch(device, recipe.archs)
    if reason is None and recipe.scaling:
        reason = scaled_mm_skip_reason(device, recipe.scaling, "bfloat16" if device.is_gpu else "float32")
    return None if reason is None else f"{recipe.name}: {reason}"
