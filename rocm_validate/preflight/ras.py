"""GPU error counters, per GPU: amdgpu's sysfs ras/ folder on AMD (uncorrectable `ue` and
correctable `ce` counts per block), NVML's ECC counters and row-remapping state on NVIDIA.

Counters that cannot be read (ECC off, a guest without access, nvidia-ml-py missing) come back as
problems with the reason, never as an exception. Counter names ending in 'ue', 'uncorrected' or
'remap_pending' / 'remap_failure' are the ones a healthy GPU keeps at zero (checks.ras_counts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rocm_validate.platform.probing import one_line
from rocm_validate.preflight.host import PciGpu, read_amd_ras

Counts = dict[str, dict[str, int]]  # subject (PCI address) -> counter -> value


def _nvml_counters(pynvml: Any, handle: Any) -> dict[str, Callable[[], int]]:
    corrected, uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    total = pynvml.nvmlDeviceGetTotalEccErrors
    return {
        "volatile.corrected": lambda: total(handle, corrected, pynvml.NVML_VOLATILE_ECC),
        "volatile.uncorrected": lambda: total(handle, uncorrected, pynvml.NVML_VOLATILE_ECC),
        # lifetime uncorrectable errors were handled when they happened (pages retired, rows remapped)
        "lifetime.uncorrected_seen": lambda: total(handle, uncorrected, pynvml.NVML_AGGREGATE_ECC),
        "rows.remap_pending": lambda: int(pynvml.nvmlDeviceGetRemappedRows(handle)[2]),
        "rows.remap_failure": lambda: int(pynvml.nvmlDeviceGetRemappedRows(handle)[3]),
    }


def nvml_counts(pynvml: Any) -> tuple[Counts, list[str]]:
    """ECC counts and row-remapping state of every NVIDIA GPU NVML sees, keyed by PCI address."""
    counts: Counts = {}
    problems: list[str] = []
    pynvml.nvmlInit()
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
            subject = bus.decode() if isinstance(bus, bytes) else str(bus)
            found, refused = {}, []
            for name, read in _nvml_counters(pynvml, handle).items():
                try:
                    found[name] = int(read())
                except Exception as exc:
                    refused.append(f"{name} ({one_line(exc)})")
            if found:
                counts[subject] = found
            if refused:
                problems.append(f"{subject}: NVML refused {', '.join(refused)}")
    finally:
        pynvml.nvmlShutdown()
    return counts, problems


def read_counts(
    gpus: list[PciGpu], import_module: Callable[[str], Any] = importlib.import_module
) -> tuple[Counts, list[str]]:
    """Every GPU's error counters (AMD from sysfs, NVIDIA from NVML) and what could not be read."""
    counts: Counts = {}
    problems: list[str] = []
    for gpu in (g for g in gpus if g.vendor == "amd"):
        found, problem = read_amd_ras(gpu)
        if found:
            counts[gpu.address] = found
        if problem:
            problems.append(problem)
    if any(g.vendor == "nvidia" for g in gpus):
        try:
            nvml_found, nvml_problems = nvml_counts(import_module("pynvml"))
        except ModuleNotFoundError:
            nvml_found, nvml_problems = (
                {},
                ["needs nvidia-ml-py to read ECC counters, found it not installed; pip install rocm-validate[nvidia]"],
            )
        except Exception as exc:
            nvml_found, nvml_problems = {}, [f"NVML unavailable: {one_line(exc)}"]
        counts.update(nvml_found)
        problems.extend(nvml_problems)
    return counts, problems
