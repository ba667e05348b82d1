"""Clocks, temperature and power around each measurement, so throttling is told apart from a
software regression.

Sources: amdsmi (ROCm) and nvidia-ml-py's `pynvml` (CUDA). Either may be missing or refuse a
query (virtual machines, containers without the management device). Each field is read on its
own: one the library refuses (the power cap of an SR-IOV guest) is listed in the sample's
`unavailable` and not asked again, and the others are kept; only when no field can be read is
telemetry `None` with the reason, and measurements go on. The functions that turn raw
readings into a `TelemetrySample` are pure and unit-tested with the dictionaries the libraries
return.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from rocm_validate.platform.amd_tools import normalize_bdf
from rocm_validate.platform.amdsmi_import import import_amdsmi
from rocm_validate.platform.clocks import ClockReading
from rocm_validate.platform.devices import VISIBILITY_VARIABLES, DeviceInfo
from rocm_validate.platform.probing import one_line
from rocm_validate.platform.processes import (
    GpuProcess,
    ProcessSample,
    others,
    read_amdsmi_processes,
    read_nvml_processes,
    unavailable,
)

# nvmlClocksEventReasons bits (nvml.h); "idle" and "applications-clocks" are not slowdowns.
NVML_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "idle"),
    (0x2, "applications-clocks"),
    (0x4, "sw-power-cap"),
    (0x8, "hw-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "sw-thermal"),
    (0x40, "hw-thermal"),
    (0x80, "hw-power-brake"),
    (0x100, "display-clock"),
)
_NOT_SLOWDOWN = frozenset({"idle", "applications-clocks", "display-clock"})


@dataclass(frozen=True)
class TelemetrySample:
    """One reading of the device's operating point."""

    clock_mhz: float | None = None  # SM (NVIDIA) / GFX (AMD) clock
    memory_clock_mhz: float | None = None
    temperature_c: float | None = None  # GPU core (NVIDIA) / hotspot (AMD)
    power_w: float | None = None
    reasons: tuple[str, ...] = ()  # active clock-limiting reasons, where the library says
    unavailable: tuple[str, ...] = ()  # readings the library refused: "power: AmdSmiLibraryException: ..."

    @property
    def slowdowns(self) -> tuple[str, ...]:
        """Reasons that actually lower clocks (power cap, thermal, hardware slowdown)."""
        return tuple(r for r in self.reasons if r not in _NOT_SLOWDOWN)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reasons"] = list(self.reasons)
        data["slowdowns"] = list(self.slowdowns)
        data["unavailable"] = list(self.unavailable)
        return data


def _reading(value: Any) -> float | None:
    """A finite number from a reading; 'N/A', None, negatives and garbage become None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (list, tuple)):
        numbers = [n for n in (_reading(v) for v in value) if n is not None]
        return max(numbers) if numbers else None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def decode_nvml_reasons(mask: int | None) -> tuple[str, ...]:
    """nvmlDeviceGetCurrentClocksEventReasons bit mask -> reason names."""
    if not mask:
        return ()
    return tuple(name for bit, name in NVML_REASONS if mask & bit)


def nvml_sample(readings: Mapping[str, Any]) -> TelemetrySample:
    """Readings taken with pynvml: sm_clock / mem_clock (MHz), temperature (C), power_mw, reasons mask."""
    power_mw = _reading(readings.get("power_mw"))
    return TelemetrySample(
        clock_mhz=_reading(readings.get("sm_clock")),
        memory_clock_mhz=_reading(readings.get("mem_clock")),
        temperature_c=_reading(readings.get("temperature")),
        power_w=None if power_mw is None else power_mw / 1000.0,
        reasons=decode_nvml_reasons(readings.get("reasons")),
    )


def _clock_of(info: Any) -> float | None:
    """amdsmi_get_clock_info result: 'clk' (ROCm 6.2+) or 'cur_clk' (ROCm 6.1 and before)."""
    if not isinstance(info, Mapping):
        return _reading(info)
    return _reading(info.get("clk", info.get("cur_clk")))


def _watts(value: Any) -> float | None:
    """amdsmi reports watts; some releases and fields report microwatts (values above 100 kW)."""
    number = _reading(value)
    if number is None:
        return None
    return number / 1e6 if number > 1e5 else number


def _celsius(value: Any) -> float | None:
    """amdsmi reports degrees C; rocm-smi-era readings are millidegrees (values above 1000)."""
    number = _reading(value)
    if number is None:
        return None
    return number / 1000.0 if number > 1000 else number


def amdsmi_sample(gfx_clock: Any, memory_clock: Any, temperature: Any, power: Any) -> TelemetrySample:
    """Readings from amdsmi_get_clock_info (GFX, MEM), amdsmi_get_temp_metric (HOTSPOT) and
    amdsmi_get_power_info. MI300 reports only the current socket power, older parts the average."""
    watts = None
    if isinstance(power, Mapping):
        watts = _watts(power.get("current_socket_power"))
        if watts is None:
            watts = _watts(power.get("average_socket_power"))
    return TelemetrySample(
        clock_mhz=_clock_of(gfx_clock),
        memory_clock_mhz=_clock_of(memory_clock),
        temperature_c=_celsius(temperature),
        power_w=watts,
    )


def nvml_clock_reading(readings: Mapping[str, Any]) -> ClockReading | None:
    """A fast reading for the clock sampler from pynvml's sm_clock, power_mw and reasons."""
    sample = nvml_sample(readings)
    if sample.clock_mhz is None:
        return None
    return ClockReading(0.0, sample.clock_mhz, sample.power_w, sample.reasons if "reasons" in readings else None)


def amdsmi_clock_reading(readings: Mapping[str, Any]) -> ClockReading | None:
    """A fast reading for the clock sampler from amdsmi's GFX clock and power (no reasons)."""
    sample = amdsmi_readings(readings)
    return None if sample.clock_mhz is None else ClockReading(0.0, sample.clock_mhz, sample.power_w, None)


class Telemetry(Protocol):
    """A source of samples for one device; `reason` says why there are none."""

    source: str
    reason: str
    power_cap_w: float | None  # the enforced board power limit, where the library tells

    def sample(self) -> TelemetrySample | None: ...

    def clock_reading(self) -> ClockReading | None:
        """Only the clock, power and limit reasons: cheap enough to read every few ms."""
        ...

    def processes(self) -> ProcessSample: ...

    def close(self) -> None: ...


class NoTelemetry:
    """No telemetry for this device, and why."""

    source = "none"
    power_cap_w: float | None = None

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def sample(self) -> TelemetrySample | None:
        return None

    def clock_reading(self) -> ClockReading | None:
        return None

    def processes(self) -> ProcessSample:
        return unavailable(self.reason)

    def close(self) -> None:
        return None


class _Reader:
    """Reads a sample field by field: a field whose call raises is recorded as unavailable (with
    the reason, once) and not called again, the others are kept; when no field can be read the
    source turns off with the reasons."""

    def __init__(
        self,
        source: str,
        fields: Mapping[str, Callable[[], Any]],
        build: Callable[[Mapping[str, Any]], TelemetrySample],
        close: Callable[[], None],
        clock_fields: tuple[str, ...] = (),
        clock_build: Callable[[Mapping[str, Any]], ClockReading | None] | None = None,
        power_cap_w: float | None = None,
        processes: Callable[[], list[GpuProcess]] | None = None,
    ) -> None:
        self.source = source
        self._fields = dict(fields)
        self._build = build
        self._close = close
        self._clock_fields = clock_fields
        self._clock_build = clock_build
        self.power_cap_w = power_cap_w
        self._processes = processes
        self.unavailable: dict[str, str] = {}
        self.reason = ""

    def sample(self) -> TelemetrySample | None:
        if self.reason:
            return None
        readings: dict[str, Any] = {}
        for name, read in self._fields.items():
            if name in self.unavailable:
                continue
            try:
                readings[name] = read()
            except Exception as exc:
                self.unavailable[name] = one_line(exc)
        refused = tuple(f"{name}: {why}" for name, why in self.unavailable.items())
        if not readings:
            self.reason = f"{self.source} reading failed: {'; '.join(refused)}"
            return None
        return replace(self._build(readings), unavailable=refused)

    def clock_reading(self) -> ClockReading | None:
        """The clock fields only, for the clock sampler (raises what the library raises)."""
        if self.reason or self._clock_build is None:
            return None
        names = [name for name in self._clock_fields if name in self._fields and name not in self.unavailable]
        return self._clock_build({name: self._fields[name]() for name in names})

    def processes(self) -> ProcessSample:
        """The other processes on the device now (this one left out), or why they are unknown."""
        if self.reason or self._processes is None:
            return unavailable(self.reason or f"{self.source} gives no process list")
        try:
            return ProcessSample(others(self._processes(), os.getpid()))
        except Exception as exc:
            return unavailable(f"{self.source} process list: {one_line(exc)}")

    def close(self) -> None:
        try:
            self._close()
        except Exception:
            return None


def _nvml_handle(pynvml: Any, device: DeviceInfo, env: Mapping[str, str]) -> Any:
    """The NVML handle of `device`: by PCI address, then UUID, then (no remapping) index."""
    if device.pci_bus_id:  # bytes: accepted by every nvidia-ml-py release, old or new
        return pynvml.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id.encode())
    if device.uuid:
        uuid = device.uuid if device.uuid.startswith("GPU-") else f"GPU-{device.uuid}"
        return pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())
    if any(env.get(name) for name in VISIBILITY_VARIABLES):
        raise LookupError("no PCI address or UUID, and a visibility variable renumbers GPUs")
    return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def _open_nvml(device: DeviceInfo, env: Mapping[str, str]) -> Telemetry:
    pynvml = importlib.import_module("pynvml")
    pynvml.nvmlInit()
    try:
        handle = _nvml_handle(pynvml, device, env)
    except BaseException:
        pynvml.nvmlShutdown()
        raise
    reasons_call = (
        getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )

    fields = {
        "sm_clock": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "mem_clock": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "temperature": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "power_mw": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        "reasons": lambda: reasons_call(handle),
    }
    return _Reader(
        "nvidia-ml-py",
        fields,
        nvml_sample,
        pynvml.nvmlShutdown,
        clock_fields=("sm_clock", "power_mw", "reasons"),
        clock_build=nvml_clock_reading,
        power_cap_w=_optional(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0),
        processes=lambda: read_nvml_processes(pynvml, handle),
    )


def _optional(read: Callable[[], Any]) -> float | None:
    """A reading taken once at open, or None when the library refuses it."""
    try:
        return _reading(read())
    except Exception:
        return None


def amdsmi_readings(readings: Mapping[str, Any]) -> TelemetrySample:
    """The readings `_open_amdsmi` takes (gfx_clock, memory_clock, temperature, power), any of them absent."""
    return amdsmi_sample(
        readings.get("gfx_clock"), readings.get("memory_clock"), readings.get("temperature"), readings.get("power")
    )


def _open_amdsmi(device: DeviceInfo, env: Mapping[str, str]) -> Telemetry:
    amdsmi = import_amdsmi(env).module
    amdsmi.amdsmi_init()
    wanted = normalize_bdf(device.pci_bus_id)
    handles = list(amdsmi.amdsmi_get_processor_handles())
    matches = [h for h in handles if wanted and normalize_bdf(amdsmi.amdsmi_get_gpu_device_bdf(h)) == wanted]
    if not matches:
        amdsmi.amdsmi_shut_down()
        raise LookupError(f"no amdsmi device at PCI address {device.pci_bus_id or 'unknown'}")
    handle = matches[0]

    fields = {
        "gfx_clock": lambda: amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.GFX),
        "memory_clock": lambda: amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.MEM),
        "temperature": lambda: amdsmi.amdsmi_get_temp_metric(
            handle, amdsmi.AmdSmiTemperatureType.HOTSPOT, amdsmi.AmdSmiTemperatureMetric.CURRENT
        ),
        "power": lambda: amdsmi.amdsmi_get_power_info(handle),
    }
    return _Reader(
        "amdsmi",
        fields,
        amdsmi_readings,
        amdsmi.amdsmi_shut_down,
        clock_fields=("gfx_clock", "power"),
        clock_build=amdsmi_clock_reading,
        power_cap_w=_optional(lambda: _watts(amdsmi.amdsmi_get_power_cap_info(handle).get("power_cap"))),
        processes=lambda: read_amdsmi_processes(amdsmi, handle),
    )


def open_telemetry(device: DeviceInfo, env: Mapping[str, str] | None = None) -> Telemetry:
    """Telemetry for `device`; never raises: a missing library or device gives NoTelemetry(reason)."""
    if not device.is_gpu:
        return NoTelemetry("the CPU has no clock telemetry here")
    library = "amdsmi" if device.backend == "rocm" else "nvidia-ml-py"
    env = dict(os.environ if env is None else env)
    try:
        telemetry = _open_amdsmi(device, env) if device.backend == "rocm" else _open_nvml(device, env)
    except ModuleNotFoundError:
        return NoTelemetry(
            f"{library} is not installed; pip install rocm-validate[{'amd' if library == 'amdsmi' else 'nvidia'}]"
        )
    except Exception as exc:
        return NoTelemetry(f"{library} unavailable: {one_line(exc)}")
    if telemetry.sample() is None:
        telemetry.close()
        return NoTelemetry(telemetry.reason)
    return telemetry
