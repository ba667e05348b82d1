"""What else ran while a measurement ran: the other processes on the GPU (NVML / amdsmi process
lists: pid, name, memory) and the host CPU's load (/proc/stat, /proc/loadavg), so a regression
caused by other work is told apart from a slower stack.

The functions that turn what a library returns into `GpuProcess` records, and /proc text into a
`HostLoad`, are pure and unit-tested with the shapes the libraries return. A list or a counter
that cannot be read is recorded as unavailable with the reason, never raised.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# NVML's "not available" value for usedGpuMemory (NVML_VALUE_NOT_AVAILABLE, unsigned long long -1).
_NVML_NOT_AVAILABLE = 2**64 - 1


@dataclass(frozen=True)
class GpuProcess:
    """A process holding a context on the GPU."""

    pid: int
    name: str = "unknown"
    memory_bytes: int | None = None

    def describe(self) -> str:
        """'pid 4242 python3 (2.0 GiB)'."""
        memory = f" ({self.memory_bytes / 1024**3:.1f} GiB)" if self.memory_bytes else ""
        return f"pid {self.pid} {self.name}{memory}"

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "name": self.name, "memory_bytes": self.memory_bytes}


@dataclass(frozen=True)
class ProcessSample:
    """The other processes on the GPU at one moment, or why they could not be read."""

    processes: tuple[GpuProcess, ...] | None  # None: unavailable
    unavailable: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.processes is None:
            return {"processes": None, "unavailable": self.unavailable}
        return {"processes": [p.to_dict() for p in self.processes]}


def unavailable(reason: str) -> ProcessSample:
    return ProcessSample(None, reason)


def others(processes: Iterable[GpuProcess], own_pid: int) -> tuple[GpuProcess, ...]:
    """Every process but this one (its own context is always on the GPU it measures)."""
    return tuple(p for p in processes if p.pid != own_pid)


def _memory(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= _NVML_NOT_AVAILABLE:
        return None
    return value


def nvml_process(info: Any, name: str) -> GpuProcess:
    """An nvmlProcessInfo_t (`pid`, `usedGpuMemory` in bytes) and the name NVML gave its pid."""
    return GpuProcess(int(info.pid), name or "unknown", _memory(getattr(info, "usedGpuMemory", None)))


def amdsmi_process(info: Mapping[str, Any]) -> GpuProcess:
    """One entry of amdsmi_get_gpu_process_list (ROCm 6.2+) or amdsmi_get_gpu_process_info
    (older): name ('N/A' when unknown), pid, and VRAM in bytes under memory_usage.vram_mem
    (`mem` is the total of every memory kind)."""
    usage = info.get("memory_usage")
    vram = usage.get("vram_mem") if isinstance(usage, Mapping) else None
    name = str(info.get("name") or "N/A")
    return GpuProcess(
        int(info["pid"]), "unknown" if name == "N/A" else name, _memory(vram if vram is not None else info.get("mem"))
    )


def process_name(pid: int, root: Path = Path("/")) -> str:
    """A process's command name from /proc/<pid>/comm, 'unknown' where it cannot be read (another
    pid namespace, a process that already ended)."""
    try:
        return (root / "proc" / str(pid) / "comm").read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def read_nvml_processes(pynvml: Any, handle: Any) -> list[GpuProcess]:
    """Compute processes on an NVML device, each named by NVML, else by /proc."""
    found = []
    for info in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        try:
            name = pynvml.nvmlSystemGetProcessName(info.pid)
            name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            name = process_name(int(info.pid))
        found.append(nvml_process(info, os.path.basename(name) or name))
    return found


def read_amdsmi_processes(amdsmi: Any, handle: Any) -> list[GpuProcess]:
    """Processes on an amdsmi device: dictionaries from ROCm 6.2 on, process handles before
    (each then read with amdsmi_get_gpu_process_info)."""
    found = []
    for entry in amdsmi.amdsmi_get_gpu_process_list(handle):
        info = entry if isinstance(entry, Mapping) else amdsmi.amdsmi_get_gpu_process_info(handle, entry)
        found.append(amdsmi_process(info))
    return found


# --- host CPU load


@dataclass(frozen=True)
class CpuTimes:
    """The first line of /proc/stat: jiffies the CPUs spent busy and in total since boot."""

    busy: int
    steal: int
    total: int
    cpus: int  # the 'cpuN' lines: CPUs online


@dataclass(frozen=True)
class HostLoad:
    """How busy the host's CPUs were during a measurement, in CPUs (1.0 = one CPU fully busy)."""

    cpus: int | None = None
    busy_cpus: float | None = None  # every process, this one included
    own_cpus: float | None = None  # this process (all its threads)
    steal_cpus: float | None = None  # a VM's CPUs taken by the hypervisor for other guests
    load_average: float | None = None  # 1-minute load average at the end
    unavailable: str = ""

    @property
    def other_cpus(self) -> float | None:
        """CPUs other work kept busy: everyone's busy time but ours (stolen time included)."""
        if self.busy_cpus is None or self.own_cpus is None:
            return None
        return max(0.0, self.busy_cpus - self.own_cpus)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "cpus": self.cpus,
            "busy_cpus": _rounded(self.busy_cpus),
            "own_cpus": _rounded(self.own_cpus),
            "other_cpus": _rounded(self.other_cpus),
            "steal_cpus": _rounded(self.steal_cpus),
            "load_average": self.load_average,
        }
        return {**data, "unavailable": self.unavailable} if self.unavailable else data


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def parse_cpu_times(stat_text: str) -> CpuTimes:
    """'cpu  user nice system idle iowait irq softirq steal guest guest_nice' (guest time is
    already inside user); raises ValueError for any other first line."""
    first = stat_text.splitlines()[0].split() if stat_text.strip() else []
    if len(first) < 5 or first[0] != "cpu":
        raise ValueError(f"expected a 'cpu' line first in /proc/stat, found {' '.join(first[:3]) or 'nothing'}")
    values = [int(v) for v in first[1:9]] + [0] * (8 - len(first[1:9]))
    user, nice, system, idle, iowait, irq, softirq, steal = values
    total = user + nice + system + idle + iowait + irq + softirq + steal
    cpus = sum(1 for line in stat_text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    return CpuTimes(busy=total - idle - iowait, steal=steal, total=total, cpus=max(cpus, 1))


def host_load(
    before: CpuTimes, after: CpuTimes, own_cpu_s: float, wall_s: float, load_average: float | None
) -> HostLoad:
    """The host's load over an interval from two /proc/stat readings and this process's CPU time."""
    cpus = after.cpus
    total = after.total - before.total
    if total <= 0 or wall_s <= 0:
        return HostLoad(cpus=cpus, load_average=load_average, unavailable="the interval was too short to measure")
    return HostLoad(
        cpus=cpus,
        busy_cpus=cpus * (after.busy - before.busy) / total,
        own_cpus=own_cpu_s / wall_s,
        steal_cpus=cpus * (after.steal - before.steal) / total,
        load_average=load_average,
    )


def _load_average(root: Path) -> float | None:
    try:
        return float((root / "proc" / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


class HostLoadMeter:
    """Measures the host's CPU load over an interval: `start()` before the work, `finish()` after."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root
        self._start: tuple[CpuTimes, float, float] | None = None
        self._problem = ""

    def _cpu_times(self) -> CpuTimes:
        return parse_cpu_times((self.root / "proc" / "stat").read_text())

    def start(self) -> HostLoadMeter:
        try:
            self._start = (self._cpu_times(), _own_cpu_s(), time.perf_counter())
        except (OSError, ValueError) as exc:
            self._problem = f"/proc/stat unreadable: {exc}"
        return self

    def finish(self) -> HostLoad:
        if self._start is None:
            return HostLoad(unavailable=self._problem or "not started")
        before, own, started = self._start
        try:
            after = self._cpu_times()
        except (OSError, ValueError) as exc:
            return HostLoad(unavailable=f"/proc/stat unreadable: {exc}")
        return host_load(before, after, _own_cpu_s() - own, time.perf_counter() - started, _load_average(self.root))
