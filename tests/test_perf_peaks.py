"""Datasheet peaks: matched by name and architecture, divided among compute partitions."""

from __future__ import annotations

import pytest

from rocm_validate.platform import peaks
from rocm_validate.platform.devices import DeviceInfo


def device(name: str, arch: str, backend: str = "rocm", partition: str | None = None) -> DeviceInfo:
    return DeviceInfo(backend=backend, index=0, name=name, arch=arch, device_key="x", compute_partition=partition)


@pytest.mark.parametrize(
    "name, arch, product",
    [
        ("AMD Instinct MI300X", "gfx942", "AMD Instinct MI300X"),
        ("AMD Instinct MI300X VF", "gfx942", "AMD Instinct MI300X"),
        ("AMD Instinct MI325X", "gfx942", "AMD Instinct MI325X"),
        ("AMD Instinct MI355X", "gfx950", "AMD Instinct MI355X"),
        ("AMD Instinct MI250X", "gfx90a", "AMD Instinct MI250X (one GCD)"),
        ("AMD Instinct MI250", "gfx90a", "AMD Instinct MI250 (one GCD)"),
        ("AMD Instinct MI210", "gfx90a", "AMD Instinct MI210"),
        ("AMD Instinct MI300A", "gfx940", "AMD Instinct MI300A"),  # the A0 engineering sample's ISA
        ("NVIDIA H100 80GB HBM3", "sm_90", "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "sm_90", "NVIDIA H100 PCIe"),
        ("NVIDIA H100 NVL", "sm_90", "NVIDIA H100 NVL"),
        ("NVIDIA H200", "sm_90", "NVIDIA H200 SXM"),
        ("NVIDIA H200 NVL", "sm_90", "NVIDIA H200 NVL"),
        ("NVIDIA A100-SXM4-80GB", "sm_80", "NVIDIA A100 SXM4 80GB"),
    ],
)
def test_each_listed_device_finds_its_own_row(name: str, arch: str, product: str) -> None:
    row = peaks.find_peaks(name, arch)
    assert row is not None and row.product == product


@pytest.mark.parametrize(
    "name, arch",
    [
        ("AMD Instinct MI308X", "gfx942"),
        ("AMD Instinct MI300X", "gfx950"),
        ("NVIDIA GeForce RTX 4090", "sm_89"),
        ("cpu", "cpu"),
    ],
)
def test_an_unlisted_or_mismatched_device_has_no_peak(name: str, arch: str) -> None:
    assert peaks.find_peaks(name, arch) is None
    assert peaks.peak_for(device(name, arch), "bf16") is None


def test_peaks_are_dense_datasheet_figures_in_metric_units() -> None:
    h100 = device("NVIDIA H100 80GB HBM3", "sm_90", backend="cuda")
    assert peaks.peak_for(h100, "bf16") == 989.5  # datasheet prints 1979 with sparsity
    assert peaks.peak_for(h100, "fp8") == 1979.0
    assert peaks.peak_for(h100, "memory") == 3350.0  # GB/s
    assert peaks.peak_for(device("AMD Instinct MI300X", "gfx942"), "fp8") == 2614.9
    assert peaks.peak_for(device("AMD Instinct MI250X", "gfx90a"), "fp8") is None


def test_a_compute_partition_gets_its_share_of_math_but_no_memory_peak() -> None:
    cpx = device("AMD Instinct MI300X", "gfx942", partition="CPX")
    assert peaks.peak_for(cpx, "bf16") == pytest.approx(1307.4 / 8, abs=0.01)
    assert peaks.peak_for(cpx, "memory") is None
    assert peaks.peak_for(cpx, "host_link") == 64.0
    assert peaks.peak_for(device("AMD Instinct MI300X", "gfx942", partition="SPX"), "memory") == 5300.0
    assert peaks.peak_for(device("AMD Instinct MI300X", "gfx942", partition="QPX"), "bf16") == pytest.approx(326.85)


def test_an_unknown_peak_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown peak kind 'tf32'"):
        peaks.PEAKS[0].value("tf32")


def test_every_row_cites_its_source_and_has_positive_figures() -> None:
    for row in peaks.PEAKS:
        assert row.source.startswith("https://")
        assert min(row.bf16, row.fp16, row.fp32, row.memory) > 0 and row.xcds >= 1


@pytest.mark.parametrize(
    ("units", "product"), [(104, "AMD Instinct MI250 (one GCD)"), (110, "AMD Instinct MI250X (one GCD)")]
)
def test_rocms_shared_mi250x_mi250_name_is_split_by_the_gcds_cu_count(units: int, product: str) -> None:
    row = peaks.find_peaks("AMD Instinct MI250X/MI250", "gfx90a", units)
    assert row is not None and row.product == product


def test_the_shared_mi250x_mi250_name_without_a_cu_count_borrows_no_peak() -> None:
    assert peaks.find_peaks("AMD Instinct MI250X/MI250", "gfx90a") is None


def test_a_gcd_whose_cus_are_not_the_products_is_not_that_product() -> None:
    assert peaks.find_peaks("AMD Instinct MI250X", "gfx90a", 104) is None
