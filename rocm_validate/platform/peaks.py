"""Datasheet peaks per device, so every throughput says how far it is from what the part can do.

All figures are dense (no structured sparsity: datasheets that print sparse figures are halved
here), per device PyTorch sees (an MI250X is two devices, one per GCD), in the units metrics
use: TFLOP/s for math, GB/s (10^9 bytes) for memory and the host link (one direction).
`fp32` is the rate an FP32 GEMM reaches with TF32 off: matrix cores on CDNA, CUDA cores on
NVIDIA. A row is matched by a pattern on the device name *and* an architecture, so a renamed
or cut-down part (MI308X, MI300X VF is matched as MI300X on purpose) never borrows a sibling's peak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rocm_validate.platform import identity
from rocm_validate.platform.device_info import DeviceInfo

KINDS = ("bf16", "fp16", "fp32", "fp8", "memory", "host_link")

_AMD_SPECS = "https://www.amd.com/en/products/accelerators/instinct"
_NVIDIA_SPECS = "https://www.nvidia.com/en-us/data-center"


@dataclass(frozen=True)
class DevicePeaks:
    """One product's datasheet peaks (see the module docstring for units and conventions)."""

    product: str
    pattern: str  # regular expression searched in the lower-cased device name
    arch: str  # the architecture the device must report
    bf16: float
    fp16: float
    fp32: float
    fp8: float | None
    memory: float  # HBM bandwidth
    host_link: float | None  # PCIe, one direction; None on an APU
    xcds: int  # compute dies that partition modes divide (MI300: 8 XCDs; 1 where none)
    source: str
    compute_units: int | None = None  # CUs of the whole package (AMD), what a partition's share is taken of

    def value(self, kind: str) -> float | None:
        if kind not in KINDS:
            raise ValueError(f"unknown peak kind {kind!r}; known: {', '.join(KINDS)}")
        return getattr(self, kind)


_MI250_GCD = DevicePeaks(
    "AMD Instinct MI250 (one GCD)",
    r"^(?!.*\bmi250x/mi250\b).*\bmi250\b",
    "gfx90a",
    181.0,
    181.0,
    45.3,
    None,
    1638.4,
    32.0,
    1,
    f"{_AMD_SPECS}/mi200/mi250.html",
    compute_units=104,
)

PEAKS: tuple[DevicePeaks, ...] = (
    # AMD: compute peaks are CUs x peak engine clock x FLOPs per CU per clock, as the datasheets print them.
    DevicePeaks(
        "AMD Instinct MI300X",
        r"\bmi300x\b",
        "gfx942",
        1307.4,
        1307.4,
        163.4,
        2614.9,
        5300.0,
        64.0,
        8,
        f"{_AMD_SPECS}/mi300/mi300x.html",
        compute_units=304,
    ),
    DevicePeaks(
        "AMD Instinct MI325X",
        r"\bmi325x\b",
        "gfx942",
        1307.4,
        1307.4,
        163.4,
        2614.9,
        6000.0,
        64.0,
        8,
        f"{_AMD_SPECS}/mi300/mi325x.html",
        compute_units=304,
    ),
    DevicePeaks(
        "AMD Instinct MI300A",
        r"\bmi300a\b",
        "gfx942",
        980.6,
        980.6,
        122.6,
        1961.2,
        5300.0,
        None,
        6,
        f"{_AMD_SPECS}/mi300/mi300a.html",
        compute_units=228,
    ),
    DevicePeaks(
        "AMD Instinct MI355X",
        r"\bmi355x\b",
        "gfx950",
        2516.6,
        2516.6,
        157.3,
        5033.2,
        8000.0,
        64.0,
        8,
        f"{_AMD_SPECS}/mi350/mi355x.html",
        compute_units=256,
    ),
    DevicePeaks(
        "AMD Instinct MI350X",
        r"\bmi350x\b",
        "gfx950",
        2306.9,
        2306.9,
        144.2,
        4613.7,
        8000.0,
        64.0,
        8,
        f"{_AMD_SPECS}/mi350/mi350x.html",
        compute_units=256,
    ),
    # MI250X / MI250: the datasheet figure covers two GCDs; PyTorch sees each GCD as a device. One PCI
    # device ID (0x740c) serves both, and ROCm names both "AMD Instinct MI250X/MI250": a GCD's CUs
    # (110 or 104) tell them apart, and that name without a CU count matches neither row.
    DevicePeaks(
        "AMD Instinct MI250X (one GCD)",
        r"\bmi250x\b(?!/mi250\b)",
        "gfx90a",
        191.5,
        191.5,
        47.9,
        None,
        1638.4,
        32.0,
        1,
        f"{_AMD_SPECS}/mi200/mi250x.html",
        compute_units=110,
    ),
    _MI250_GCD,
    # MI210: one GCD of the MI250's, on a PCIe card (the same CUs, clock and HBM2e bandwidth).
    replace(_MI250_GCD, product="AMD Instinct MI210", pattern=r"\bmi210\b", source=f"{_AMD_SPECS}/mi200/mi210.html"),
    # NVIDIA: tensor-core figures are the datasheet's "with sparsity" numbers halved.
    DevicePeaks(
        "NVIDIA H100 SXM",
        r"\bh100\b(?!.*\b(pcie|nvl)\b)",
        "sm_90",
        989.5,
        989.5,
        67.0,
        1979.0,
        3350.0,
        64.0,
        1,
        f"{_NVIDIA_SPECS}/h100/",
    ),
    DevicePeaks(
        "NVIDIA H100 PCIe",
        r"\bh100\b.*\bpcie\b",
        "sm_90",
        756.5,
        756.5,
        51.0,
        1513.0,
        2000.0,
        64.0,
        1,
        f"{_NVIDIA_SPECS}/h100/",
    ),
    DevicePeaks(
        "NVIDIA H100 NVL",
        r"\bh100\b.*\bnvl\b",
        "sm_90",
        835.5,
        835.5,
        60.0,
        1670.5,
        3900.0,
        64.0,
        1,
        f"{_NVIDIA_SPECS}/h100/",
    ),
    DevicePeaks(
        "NVIDIA H200 SXM",
        r"\bh200\b(?!.*\bnvl\b)",
        "sm_90",
        989.5,
        989.5,
        67.0,
        1979.0,
        4800.0,
        64.0,
        1,
        f"{_NVIDIA_SPECS}/h200/",
    ),
    DevicePeaks(
        "NVIDIA H200 NVL",
        r"\bh200\b.*\bnvl\b",
        "sm_90",
        835.5,
        835.5,
        60.0,
        1670.5,
        4800.0,
        64.0,
        1,
        f"{_NVIDIA_SPECS}/h200/",
    ),
    DevicePeaks(
        "NVIDIA A100 SXM4 80GB",
        r"\ba100\b.*\bsxm4?\b.*\b80gb\b",
        "sm_80",
        312.0,
        312.0,
        19.5,
        None,
        2039.0,
        32.0,
        1,
        f"{_NVIDIA_SPECS}/a100/",
    ),
    DevicePeaks(
        "NVIDIA A100 SXM4 40GB",
        r"\ba100\b.*\bsxm4?\b.*\b40gb\b",
        "sm_80",
        312.0,
        312.0,
        19.5,
        None,
        1555.0,
        32.0,
        1,
        f"{_NVIDIA_SPECS}/a100/",
    ),
    DevicePeaks(
        "NVIDIA A100 80GB PCIe",
        r"\ba100\b.*\b80gb\b.*\bpcie\b",
        "sm_80",
        312.0,
        312.0,
        19.5,
        None,
        1935.0,
        32.0,
        1,
        f"{_NVIDIA_SPECS}/a100/",
    ),
)

# Partitions of a package in each compute mode (CPX gives every XCD its own device).
PARTITION_COUNTS = {"spx": 1, "dpx": 2, "tpx": 3, "qpx": 4}


def find_peaks(name: str, arch: str, compute_units: int | None = None) -> DevicePeaks | None:
    """The datasheet row for a device name and architecture; None for unlisted devices. An
    engineering sample's ISA (MI300A A0: gfx940) finds its product's row; a one-die part whose
    CU count is known must have the row's (104 CUs is no MI250X GCD)."""
    product = identity.identify(name=name, arch=arch, compute_units=compute_units).product
    text = (product.name if product is not None else name).lower()
    for row in PEAKS:
        if arch not in _row_archs(row) or not re.search(row.pattern, text):
            continue
        if row.xcds == 1 and row.compute_units and compute_units and compute_units != row.compute_units:
            continue
        return row
    return None


def _row_archs(row: DevicePeaks) -> tuple[str, ...]:
    product = next((p for p in identity.PRODUCTS if p.name == row.product), None)
    return (row.arch, *(product.early_archs if product else ()))


def row_for(device: DeviceInfo) -> DevicePeaks | None:
    """The datasheet row of a described device (its name, ISA and CU count)."""
    return find_peaks(device.name, device.arch, device.compute_units)


def partition_count(row: DevicePeaks, compute_partition: str | None) -> int | None:
    """How many devices a package shows in a compute mode: 1 for SPX (or none), 8 for CPX on MI300X."""
    mode = (compute_partition or "spx").strip().lower()
    if mode in ("", "n/a"):
        mode = "spx"
    count = row.xcds if mode == "cpx" else PARTITION_COUNTS.get(mode)
    return None if count is None or count > row.xcds else count


def partition_share(row: DevicePeaks, compute_partition: str | None, compute_units: int | None = None) -> float | None:
    """Fraction of the package one device gets: its share of the package's CUs where both counts are
    known (38 of 304 on an MI300X CPX partition, whatever mode was or was not reported), else
    1 / the mode's partition count."""
    if row.compute_units and compute_units and 0 < compute_units <= row.compute_units:
        return compute_units / row.compute_units
    count = partition_count(row, compute_partition)
    return None if count is None else 1.0 / count


def peak_for(device: DeviceInfo, kind: str) -> float | None:
    """The datasheet peak of `kind` for the device, or None where the datasheet says nothing.

    A compute partition gets its share of the math peaks; memory bandwidth per partition is not
    on any datasheet, so a partitioned device has no memory peak. The host link is per device.
    """
    row = row_for(device)
    if row is None:
        return None
    value = row.value(kind)
    if value is None or kind == "host_link":
        return value
    share = partition_share(row, device.compute_partition, device.compute_units)
    if share is None or (kind == "memory" and share != 1.0):
        return None
    return round(value * share, 2)
