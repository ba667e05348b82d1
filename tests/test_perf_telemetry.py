"""Telemetry parsing from the dictionaries and numbers nvidia-ml-py and amdsmi return, and
graceful absence."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

from rocm_validate.platform import telemetry
from rocm_validate.platform.devices import DeviceInfo


def test_nvml_readings_become_a_sample_with_decoded_slowdowns() -> None:
    sample = telemetry.nvml_sample(
        {"sm_clock": 1755, "mem_clock": 2619, "temperature": 61, "power_mw": 612_345, "reasons": 0x4 | 0x1}
    )
    assert (sample.clock_mhz, sample.memory_clock_mhz, sample.temperature_c) == (1755, 2619, 61)
    assert sample.power_w == 612.345
    assert sample.reasons == ("idle", "sw-power-cap") and sample.slowdowns == ("sw-power-cap",)


def test_amdsmi_readings_of_either_release_become_a_sample() -> None:
    rocm6 = telemetry.amdsmi_sample(
        {"clk": 2100, "min_clk": 500, "max_clk": 2100},
        {"clk": 1300},
        52,
        {"current_socket_power": 701, "average_socket_power": "N/A"},
    )
    assert (rocm6.clock_mhz, rocm6.memory_clock_mhz, rocm6.temperature_c, rocm6.power_w) == (2100, 1300, 52, 701)
    rocm5 = telemetry.amdsmi_sample(
        {"cur_clk": 1700}, {"cur_clk": 1600}, 44000, {"current_socket_power": "N/A", "average_socket_power": 91_000_000}
    )
    assert (rocm5.clock_mhz, rocm5.temperature_c, rocm5.power_w) == (1700, 44.0, 91.0)


def test_unsupported_readings_become_none_not_errors() -> None:
    sample = telemetry.amdsmi_sample("N/A", None, "N/A", "N/A")
    assert sample == telemetry.TelemetrySample()
    assert telemetry.nvml_sample({}).to_dict()["slowdowns"] == []


def test_the_cpu_has_no_telemetry_and_says_why() -> None:
    source = telemetry.open_telemetry(DeviceInfo(backend="cpu", index=None, name="cpu", arch="cpu", device_key="cpu-x"))
    assert source.sample() is None and source.source == "none" and "CPU" in source.reason


def test_a_missing_library_leaves_telemetry_off_with_the_install_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    gpu = DeviceInfo(backend="cuda", index=0, name="NVIDIA H100 80GB HBM3", arch="sm_90", device_key="h100")
    assert "pip install rocm-validate[nvidia]" in telemetry.open_telemetry(gpu, env={}).reason
    mi300 = DeviceInfo(backend="rocm", index=0, name="AMD Instinct MI300X", arch="gfx942", device_key="mi300x")
    assert "pip install rocm-validate[amd]" in telemetry.open_telemetry(mi300, env={}).reason


class AmdSmiLibraryException(Exception):
    """What amdsmi raises for a query the device refuses."""


def test_a_field_the_library_refuses_is_recorded_and_the_others_kept() -> None:
    calls = {"power": 0}

    def power() -> float:
        calls["power"] += 1
        raise AmdSmiLibraryException("Error code: 2 | AMDSMI_STATUS_NOT_SUPPORTED")

    fields = {"gfx_clock": lambda: {"clk": 2100}, "temperature": lambda: 52, "power": power}
    reader = telemetry._Reader("amdsmi", fields, telemetry.amdsmi_readings, lambda: None)
    first, second = reader.sample(), reader.sample()
    assert (first.clock_mhz, first.temperature_c, first.power_w) == (2100, 52, None)
    assert first.unavailable == ("power: AmdSmiLibraryException: Error code: 2 | AMDSMI_STATUS_NOT_SUPPORTED",)
    assert second == first and calls["power"] == 1  # a refused field is not asked again
    assert reader.reason == ""


def test_when_no_field_can_be_read_the_source_turns_off_with_the_reasons() -> None:
    def lost() -> int:
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    reader = telemetry._Reader(
        "nvidia-ml-py", {"sm_clock": lost, "power_mw": lost}, telemetry.nvml_sample, lambda: None
    )
    assert reader.sample() is None and reader.sample() is None
    assert (
        reader.reason
        == "nvidia-ml-py reading failed: sm_clock: RuntimeError: NVML_ERROR_GPU_IS_LOST; power_mw: RuntimeError: NVML_ERROR_GPU_IS_LOST"
    )


def _sr_iov_amdsmi() -> types.ModuleType:
    """An amdsmi whose device, like an SR-IOV guest's, reads clocks and temperature but not power."""
    amdsmi = types.ModuleType("amdsmi")
    amdsmi.AmdSmiClkType = SimpleNamespace(GFX="GFX", MEM="MEM")
    amdsmi.AmdSmiTemperatureType = SimpleNamespace(HOTSPOT="HOTSPOT")
    amdsmi.AmdSmiTemperatureMetric = SimpleNamespace(CURRENT="CURRENT")
    amdsmi.amdsmi_init = lambda: None
    amdsmi.amdsmi_shut_down = lambda: None
    amdsmi.amdsmi_get_processor_handles = lambda: ["handle0"]
    amdsmi.amdsmi_get_gpu_device_bdf = lambda handle: "0000:26:00.0"
    amdsmi.amdsmi_get_clock_info = lambda handle, kind: {"clk": 2100 if kind == "GFX" else 1300, "max_clk": 2100}
    amdsmi.amdsmi_get_temp_metric = lambda handle, kind, metric: 41

    def power(handle: str) -> dict:
        raise AmdSmiLibraryException("Error code: 2 | AMDSMI_STATUS_NOT_SUPPORTED")

    amdsmi.amdsmi_get_power_info = power
    return amdsmi


def test_an_sr_iov_guest_keeps_clock_telemetry_when_its_power_reading_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", _sr_iov_amdsmi())
    mi300 = DeviceInfo(
        backend="rocm", index=0, name="AMD Instinct MI300X", arch="gfx942", device_key="k", pci_bus_id="0000:26:00.0"
    )
    source = telemetry.open_telemetry(mi300, env={})
    sample = source.sample()
    assert source.source == "amdsmi" and (sample.clock_mhz, sample.memory_clock_mhz, sample.temperature_c) == (
        2100,
        1300,
        41,
    )
    assert sample.power_w is None and sample.to_dict()["unavailable"] == [
        "power: AmdSmiLibraryException: Error code: 2 | AMDSMI_STATUS_NOT_SUPPORTED"
    ]
