"""Capability probes: ask the device itself, once per run, instead of guessing from versions.

Row-wise `torch._scaled_mm` on ROCm needs torch 2.7+ and a hipBLASLt with the vector-scale
extension, and gfx950's row-wise kernels came later still; no version rule is right on every
node. So a 16x16x16 call on the device decides, once per device and scaling (the result is
cached for the process), and a refusal of any exception type, ValueError as well as
RuntimeError, is the answer "not here" with its reason. The pure rule
`capabilities.scaled_mm_supported` stays the explanation, and the answer wherever the probe
cannot run (a device described from another machine, a fake device in a test).

torch is imported inside the functions only: the platform layer stays torch-free at import.
"""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass
from typing import Any

from rocm_validate.platform.arch import parse_gcn_arch, sm_arch
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.platform.probing import one_line

PROBE_SIZE = 16  # the smallest GEMM every FP8 kernel accepts (K and N multiples of 16)


@dataclass(frozen=True)
class ProbeResult:
    """What the device answered: supported, or refused with the exception it raised."""

    supported: bool
    refusal: str = ""  # "ValueError: ..." when refused


def scaled_mm_probe(device: DeviceInfo, scaling: str) -> ProbeResult | None:
    """`torch._scaled_mm` with `scaling` ('tensorwise' or 'rowwise') tried on `device`, once per
    run; None when the device is not one this process drives (torch not imported, no such GPU,
    or a GPU of another arch at that index), so the caller falls back to the version rule."""
    torch = sys.modules.get("torch")
    if torch is None or not device.is_gpu or device.index is None or not device.fp8_formats:
        return None
    if not _drives(torch, device):
        return None
    return _cached_probe(device.torch_device, device.arch, device.fp8_formats[0], scaling)


def _drives(torch: Any, device: DeviceInfo) -> bool:
    """Whether this process's GPU at `device.index` is the device described (same backend and arch)."""
    try:
        if not torch.cuda.is_available() or device.index >= torch.cuda.device_count():
            return False
        if bool(getattr(torch.version, "hip", None)) != (device.backend == "rocm"):
            return False
        props = torch.cuda.get_device_properties(device.index)
    except Exception:
        return False
    if device.backend == "rocm":
        found = parse_gcn_arch(str(getattr(props, "gcnArchName", ""))).name
    else:
        found = sm_arch(int(props.major), int(props.minor))
    return found == device.arch


@functools.cache
def _cached_probe(torch_device: str, arch: str, fp8_format: str, scaling: str) -> ProbeResult:
    """One probe per device, arch and scaling for the life of the process (arch is in the key so
    a different GPU at the same index is probed again)."""
    return run_scaled_mm_probe(importlib.import_module("torch"), torch_device, fp8_format, scaling)


def run_scaled_mm_probe(torch: Any, torch_device: str, fp8_format: str, scaling: str) -> ProbeResult:
    """One PROBE_SIZE-cubed `torch._scaled_mm` on `torch_device` in `fp8_format`, bf16 out, with a
    scale per tensor or per row of A and column of B; waits for the device so an asynchronous
    failure counts too. Only a refusal is judged here: a wrong result is the correctness
    suite's to report, not a reason to skip it."""
    n = PROBE_SIZE
    try:
        dtype = getattr(torch, f"float8_{fp8_format}")
        a = torch.ones(n, n, device=torch_device).to(dtype)
        b = torch.ones(n, n, device=torch_device).to(dtype).t()
        shapes = ((n, 1), (1, n)) if scaling == "rowwise" else ((), ())
        scale_a, scale_b = (torch.ones(shape, device=torch_device) for shape in shapes)
        torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
        if torch_device.startswith("cuda"):
            torch.cuda.synchronize(torch_device)
    except Exception as exc:
        return ProbeResult(False, one_line(exc))
    return ProbeResult(True)
