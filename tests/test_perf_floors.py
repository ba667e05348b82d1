"""The shipped floors per SKU (each with its source), and user floors that fail a node below them."""

from __future__ import annotations

import dataclasses
import json

import fake_devices
import pytest

from rocm_validate.perf import floors
from rocm_validate.platform.devices import DeviceInfo


def gpu(name: str, arch: str, backend: str = "rocm", **changes) -> DeviceInfo:
    return DeviceInfo(backend=backend, index=0, name=name, arch=arch, **{"device_key": "k", **changes})


def test_an_mi300x_gets_rvs_and_acceptance_figures_with_their_sources():
    mi300x = gpu("AMD Instinct MI300X", "gfx942")
    bf16 = floors.shipped_floor(mi300x, "gemm.bf16.8192x8192x8192")
    fp8 = floors.shipped_floor(mi300x, "gemm.fp8.8192x8192x8192")
    copy = floors.shipped_floor(mi300x, "copy.device.2048mib")
    assert (bf16.value, fp8.value, copy.value) == (552.0, 1215.0, 4177.3)
    assert "ROCm Validation Suite" in bf16.source and "gst_single" in fp8.source and "BabelStream" in copy.source


def test_an_mi325x_has_the_mi300x_compute_figures_and_its_own_memory_share():
    mi325x = gpu("AMD Instinct MI325X", "gfx942")
    assert floors.shipped_floor(mi325x, "gemm.bf16.8192x8192x8192").value == 552.0
    copy = floors.shipped_floor(mi325x, "copy.device.2048mib")
    assert copy.value == pytest.approx(4177.285 / 5300 * 6000, abs=0.1) and "78.8% of the datasheet peak" in copy.source


def test_an_mi355x_gets_the_mi300x_figures_share_of_its_own_peak():
    mi355x = gpu("AMD Instinct MI355X", "gfx950")
    assert floors.shipped_floor(mi355x, "gemm.bf16.8192x8192x8192").value == pytest.approx(
        552 / 1307.4 * 2516.6, abs=0.1
    )
    assert floors.shipped_floor(mi355x, "gemm.fp8.8192x8192x8192").value == pytest.approx(
        1215 / 2614.9 * 5033.2, abs=0.1
    )


def test_a_cpx_partition_gets_an_eighth_of_the_compute_floor_and_no_memory_floor():
    cpx = dataclasses.replace(fake_devices.mi300x("amd-smi-static-mi300x-cpx-nps4-64dev.json"))
    assert cpx.compute_partition and cpx.compute_partition.upper() == "CPX"
    assert floors.shipped_floor(cpx, "gemm.bf16.8192x8192x8192").value == 69.0
    assert floors.shipped_floor(cpx, "copy.device.2048mib") is None


def test_an_mi250x_without_fp8_has_no_fp8_floor():
    assert floors.shipped_floor(gpu("AMD Instinct MI250X", "gfx90a"), "gemm.fp8.8192x8192x8192") is None


def test_an_h100_and_an_h200_get_three_quarters_of_what_was_measured_here():
    h100 = floors.shipped_floor(fake_devices.h100(), "gemm.bf16.8192x8192x8192")
    assert h100.value == round(0.75 * 688.1, 1) and "measured on the lent H100" in h100.source and "DCGM" in h100.source
    h200 = floors.shipped_floor(gpu("NVIDIA H200", "sm_90", "cuda"), "sdpa.forward.llama-8b.8x32x4096x128")
    assert h200.value == round(0.75 * 521.1, 1) and "lent H200" in h200.source


def test_another_nvidia_part_gets_the_h100s_measured_share_of_its_own_peak():
    pcie = floors.shipped_floor(gpu("NVIDIA H100 PCIe", "sm_90", "cuda"), "gemm.bf16.8192x8192x8192")
    assert pcie.value == pytest.approx(0.75 * 688.1 / 989.5 * 756.5, abs=0.1) and "H100 SXM reached here" in pcie.source


@pytest.mark.parametrize(
    "metric", ["launch.empty_kernel.host_us", "copy.h2d.pinned.512mib", "gemm.bf16.4096x4096x4096"]
)
def test_host_side_latency_and_unlisted_metrics_have_no_shipped_floor(metric):
    assert floors.shipped_floor(fake_devices.h100(), metric) is None


def test_an_unlisted_device_has_no_shipped_floors():
    assert floors.shipped_floor(gpu("AMD Radeon PRO W7900", "gfx1100"), "gemm.bf16.8192x8192x8192") is None
    assert floors.shipped_floor(fake_devices.cpu(), "gemm.bf16.8192x8192x8192") is None


def test_an_mi250_gcd_gets_its_own_floors_not_the_mi250xs():
    mi250 = floors.shipped_floor(
        gpu("AMD Instinct MI250X/MI250", "gfx90a", compute_units=104), "gemm.bf16.8192x8192x8192"
    )
    mi250x = floors.shipped_floor(gpu("AMD Instinct MI250X", "gfx90a", compute_units=110), "gemm.bf16.8192x8192x8192")
    assert mi250 is not None and mi250x is not None and mi250.value < mi250x.value


def test_user_floors_stored_under_a_devices_older_key_are_read(tmp_path):
    old = "amd-instinct-mi350-oam-gfx950"
    entry = {
        "value": 900.0,
        "unit": "TFLOP/s",
        "better": "higher",
        "dispersion": None,
        "samples": 1,
        "provenance": {"date": "2026-01-01"},
    }
    data = {"schema": "rocm-validate/baselines/1", "device_key": old, "metrics": {"gemm.bf16.8192x8192x8192": entry}}
    (tmp_path / f"{old}.json").write_text(json.dumps(data))
    mi350x = gpu("AMD Instinct MI350X", "gfx950", device_key="amd-instinct-mi350x-gfx950", key_aliases=(old,))
    table = floors.FloorTable(mi350x, tmp_path)
    assert table.floor("gemm.bf16.8192x8192x8192").value == 900.0 and table.user_file == tmp_path / f"{old}.json"


CONFTEST = """
import pytest
from rocm_validate.perf.recorder import Measurement
from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import Timing

@pytest.fixture
def timed():
    def make(seconds):
        return Measurement(Timing(SampleSummary(tuple(seconds for _ in range(12)), 1), "synthetic", 0.0, True), {})
    return make
"""

MEASURED = {  # name -> (seconds per call, work per call, unit): what the fake device does
    "gemm.bf16.8192x8192x8192": (0.0015, 2 * 8192**3, "TFLOP/s"),
    "copy.device.2048mib": (0.001, 2 * 2**31, "GB/s"),
    "sdpa.forward.bert-large.48x16x512x64": (0.0002, 5.2e10, "TFLOP/s"),
}
DIVISOR = {"TFLOP/s": 1e12, "GB/s": 1e9}


@pytest.mark.parametrize("scale, outcome", [(10.0, "failed"), (0.1, "passed")])
def test_floors_ten_times_what_the_device_does_fail_every_metric_and_a_tenth_pass(pytester, scale, outcome):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()) + CONFTEST)
    tests = "\n".join(
        f"def test_{i}(perf, timed):\n    perf.throughput({name!r}, timed({s}), {work}, {unit!r})\n"
        for i, (name, (s, work, unit)) in enumerate(MEASURED.items())
    )
    pytester.makepyfile(test_floored=f"import pytest\n\npytestmark = pytest.mark.rocm_suite('perf')\n\n{tests}")
    folder = pytester.mkdir("floors")
    metrics = {
        name: {
            "value": scale * work / s / DIVISOR[unit],
            "unit": unit,
            "better": "higher",
            "dispersion": None,
            "samples": None,
            "provenance": {"date": "2026-11-23", "source": f"x{scale:g}"},
        }
        for name, (s, work, unit) in MEASURED.items()
    }
    (folder / "nvidia-h100-80gb-hbm3-sm90.json").write_text(
        __import__("json").dumps(
            {"schema": "rocm-validate/baselines/1", "device_key": "nvidia-h100-80gb-hbm3-sm90", "metrics": metrics}
        )
    )
    pytester.mkdir("baselines")
    result = pytester.runpytest(
        "--rocm-suite=perf", f"--rocm-floors={folder}", f"--rocm-baselines={pytester.path / 'baselines'}"
    )
    result.assert_outcomes(**{outcome: len(MEASURED)})
