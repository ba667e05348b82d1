"""Partition modes where the vendor tools say nothing: sysfs, then inference said as inferred; and the
peak a partition gets, its share of the package's CUs."""

from __future__ import annotations

import pytest

from rocm_validate.platform import partitions, peaks
from rocm_validate.platform.devices import DeviceInfo


@pytest.mark.parametrize(
    ("name", "arch", "compute_units", "mode"),
    [
        ("AMD Instinct MI300X", "gfx942", 304, "SPX"),
        ("AMD Instinct MI300X", "gfx942", 152, "DPX"),
        ("AMD Instinct MI300X", "gfx942", 76, "QPX"),
        ("AMD Instinct MI300X", "gfx942", 38, "CPX"),
        ("AMD Instinct MI300A", "gfx942", 76, "TPX"),
        ("AMD Instinct MI300A", "gfx942", 38, "CPX"),
        ("AMD Instinct MI355X", "gfx950", 32, "CPX"),
        ("AMD Instinct MI325X", "gfx942", 38, "CPX"),
    ],
)
def test_the_cu_count_against_the_packages_names_the_compute_mode(name, arch, compute_units, mode):
    inferred = partitions.infer_from_compute_units(name, arch, compute_units)
    assert inferred is not None and (inferred.compute, inferred.memory) == (mode, None)
    assert inferred.source.startswith(f"inferred from {compute_units} of ")


@pytest.mark.parametrize(
    ("name", "arch", "compute_units"),
    [
        ("AMD Instinct MI308X OAM", "gfx942", 80),  # a cut-down part, not a partition of a listed one
        ("AMD Instinct MI300X", "gfx942", 100),  # divides no mode
        ("AMD Instinct MI300X", "gfx942", None),
        ("AMD INSTINCT MI250X", "gfx90a", 110),  # no partition modes at all
        ("NVIDIA H100 80GB HBM3", "sm_90", 132),
    ],
)
def test_nothing_is_inferred_where_the_count_says_nothing(name, arch, compute_units):
    assert partitions.infer_from_compute_units(name, arch, compute_units) is None


def test_partitions_behind_one_pci_address_name_the_mode():
    tpx = partitions.infer_from_shared_address("AMD Instinct MI300A", "gfx942", 3, "0000:01:00")
    assert (tpx.compute, tpx.source) == (
        "TPX",
        "inferred from 3 devices at PCI address 0000:01:00 (AMD Instinct MI300A)",
    )
    assert partitions.infer_from_shared_address("AMD Instinct MI300X", "gfx942", 8, "0000:0c:00").compute == "CPX"
    assert (
        partitions.infer_from_shared_address("AMD INSTINCT MI250 (MCM) OAM AC MBA", "gfx90a", 1, "0000:2f:00") is None
    )


def _partition_files(root, bdf: str, compute: str, memory: str) -> None:
    (root / bdf).mkdir(parents=True)
    (root / bdf / "current_compute_partition").write_text(f"{compute}\n")
    (root / bdf / "current_memory_partition").write_text(f"{memory}\n")


def test_sysfs_gives_both_modes_of_a_pci_device(tmp_path):
    _partition_files(tmp_path, "0000:0c:00.0", "CPX", "NPS4")
    mode = partitions.read_sysfs_partition("0000:0c:00.0", tmp_path)
    assert mode == partitions.PartitionMode("CPX", "NPS4", "sysfs")


def test_a_partitions_own_function_falls_back_to_the_packages_function_0(tmp_path):
    _partition_files(tmp_path, "0000:0c:00.0", "CPX", "NPS1")
    assert partitions.read_sysfs_partition("0000:0c:00.5", tmp_path).compute == "CPX"


def test_no_sysfs_files_means_no_reading(tmp_path):
    (tmp_path / "0000:0c:00.0").mkdir()
    assert partitions.read_sysfs_partition("0000:0c:00.0", tmp_path) is None
    assert partitions.read_sysfs_partition(None, tmp_path) is None


def _gpu(name: str, arch: str, compute_units: int | None, partition: str | None = None) -> DeviceInfo:
    return DeviceInfo(
        backend="rocm",
        index=0,
        name=name,
        arch=arch,
        device_key="k",
        compute_units=compute_units,
        compute_partition=partition,
    )


def test_a_partitions_peak_is_its_share_of_the_packages_cus():
    row = peaks.find_peaks("AMD Instinct MI300X", "gfx942")
    assert peaks.partition_share(row, None, 38) == pytest.approx(1 / 8)  # no mode reported: the CUs still tell
    assert peaks.partition_share(row, "SPX", 304) == 1.0
    assert peaks.peak_for(_gpu("AMD Instinct MI300X", "gfx942", 38), "bf16") == pytest.approx(1307.4 / 8, abs=0.01)
    assert peaks.peak_for(_gpu("AMD Instinct MI300X", "gfx942", 38), "memory") is None
    assert peaks.peak_for(_gpu("AMD Instinct MI300A", "gfx942", 76, "TPX"), "fp8") == pytest.approx(
        1961.2 / 3, abs=0.01
    )


def test_without_a_cu_count_the_mode_decides_the_share():
    assert peaks.peak_for(_gpu("AMD Instinct MI355X", "gfx950", None, "CPX"), "bf16") == pytest.approx(
        2516.6 / 8, abs=0.01
    )
    assert peaks.peak_for(_gpu("AMD Instinct MI300X", "gfx942", None), "memory") == 5300.0
