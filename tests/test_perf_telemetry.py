"""Telemetry parsing from the dictionaries and numbers nvidia-ml-py and amdsmi return, and
graceful absence."""

from __future__ import annotations

import sys

from rocm_validate.platform import telemetry
from rocm_validate.platform.devices import DeviceInfo


def test_nvml_readings_become_a_sample_with_decoded_slowdowns() -> None:
    sample = telemetry.nvml_sample({"sm_clock": 1755, "mem_clock": 2619, "temperature": 61, "power_mw": 612_345, "reasons": 0x4 | 0x1})
    assert (sample.clock_mhz, sample.memory_clock_mhz, sample.temperature_c) == (1755, 2619, 61)
    assert sample.power_w == 612.345
    assert sample.reasons == ("idle", "sw-power-cap") and sample.slowdowns == ("sw-power-cap",)


def test_amdsmi_readings_of_either_release_become_a_sample() -> None:
    rocm6 = telemetry.amdsmi_sample({"clk": 2100, "min_clk": 500, "max_clk": 2100}, {"clk": 1300}, 52, {"current_socket_power": 701, "average_socket_power": "N/A"})
    assert (rocm6.clock_mhz, rocm6.memory_clock_mhz, rocm6.temperature_c, rocm6.power_w) == (2100, 1300, 52, 701)
    rocm5 = telemetry.amdsmi_sample({"cur_clk": 1700}, {"cur_clk": 1600}, 44000, {"current_socket_power": "N/A", "average_socket_power": 91_000_000})
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


def test_a_reading_that_fails_turns_the_source_off_with_the_reason() -> None:
    def broken() -> telemetry.TelemetrySample:
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    reader = telemetry._Reader("nvidia-ml-py", broken, lambda: None)
    assert reader.sample() is None and reader.sample() is None
    assert "NVML_ERROR_GPU_IS_LOST" in reader.reason
