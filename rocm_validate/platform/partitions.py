"""Compute and memory partition modes of an MI300-class package where the vendor tools say nothing.

Three ways to know a mode, in order of trust: a vendor tool (amdsmi, amd-smi, rocm-smi); the
kernel's sysfs files (`current_compute_partition` / `current_memory_partition` of the PCI
device), which need no ROCm library at all; and, as a last resort, inference from what the
device is: 38 of an MI300X's 304 CUs is a CPX partition, three devices behind one MI300A PCI
address are TPX. An inferred mode always says so in `PartitionMode.source`, so a report never
passes a guess off as a reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rocm_validate.platform.amd_tools import pci_device_address
from rocm_validate.platform.peaks import PARTITION_COUNTS, DevicePeaks, find_peaks

SYSFS_PCI_DEVICES = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class PartitionMode:
    """A package's compute mode (SPX, DPX, TPX, QPX, CPX) and memory mode (NPS1, NPS4), and how they are known."""

    compute: str | None
    memory: str | None
    source: str  # "sysfs", or "inferred from ..." naming the evidence


def read_sysfs_partition(bdf: str | None, root: Path = SYSFS_PCI_DEVICES) -> PartitionMode | None:
    """The modes the amdgpu driver exposes for the PCI device `bdf` ('0000:0c:00.3'), read from the
    function itself or, for a partition, the package's function 0; None when the files are absent
    (not an MI300-class part, an older kernel, or no such device)."""
    if not bdf:
        return None
    for candidate in dict.fromkeys((bdf, pci_device_address(bdf) + ".0")):
        compute = _read_mode(root / candidate / "current_compute_partition")
        memory = _read_mode(root / candidate / "current_memory_partition")
        if compute or memory:
            return PartitionMode(compute, memory, "sysfs")
    return None


def _read_mode(path: Path) -> str | None:
    try:
        text = path.read_text().strip().upper()
    except OSError:
        return None
    return text or None


def mode_for_count(row: DevicePeaks, count: int) -> str | None:
    """The compute mode in which `row`'s package shows `count` devices: 8 -> CPX on an MI300X;
    None for a product without partition modes (one compute die, an MI250 GCD)."""
    if row.xcds <= 1:
        return None
    if count == row.xcds:
        return "CPX"
    return next((mode.upper() for mode, n in PARTITION_COUNTS.items() if n == count and n <= row.xcds), None)


def infer_from_compute_units(name: str, arch: str, compute_units: int | None) -> PartitionMode | None:
    """The compute mode a device's CU count implies against its package's (304 MI300X, 228 MI300A,
    256 MI355X); None for an unlisted or cut-down product (an MI308X is not a partition of anything)."""
    row = find_peaks(name, arch)
    if row is None or not row.compute_units or not compute_units or row.compute_units % compute_units:
        return None
    mode = mode_for_count(row, row.compute_units // compute_units)
    if mode is None:
        return None
    return PartitionMode(mode, None, f"inferred from {compute_units} of {row.compute_units} CUs ({row.product})")


def infer_from_shared_address(name: str, arch: str, count: int, address: str) -> PartitionMode | None:
    """The compute mode implied by `count` devices listed behind one PCI device (a tool's listing
    of partitions: amd-smi list, rocm-smi --showhw); None for an unlisted product."""
    row = find_peaks(name, arch)
    mode = None if row is None else mode_for_count(row, count)
    if row is None or mode is None:
        return None
    noun = "device" if count == 1 else "devices"
    return PartitionMode(mode, None, f"inferred from {count} {noun} at PCI address {address} ({row.product})")
