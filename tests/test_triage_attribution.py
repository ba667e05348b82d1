"""Attribution of perf regressions from the evidence around each measurement: fake process lists
in the shapes NVML and amdsmi return, fake /proc/stat readings, fake clocks and limits."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocm_validate.perf import gate
from rocm_validate.perf.attribution import attribute, held_back_by, is_host_side
from rocm_validate.perf.gate import Baseline, Threshold
from rocm_validate.platform import processes, telemetry
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.results.metrics import Metric

GIB = 1024**3
LOADER = {"pid": 4242, "name": "python3", "memory_bytes": 2 * GIB}

RECORD = "pytest --rocm-suite=perf --update-baselines"  # the command a message names to record a baseline


def evidence(
    clock: float | None = 1755.0,
    slowdowns: tuple[str, ...] = (),
    before: list | None = None,
    after: list | None = None,
    host: dict | None = None,
    unavailable: str = "",
) -> dict:
    """The telemetry a measurement carries: samples, process lists before/after, host load."""

    def sample(found: list | None) -> dict:
        return {"processes": None, "unavailable": unavailable} if unavailable else {"processes": found or []}

    return {
        "source": "nvidia-ml-py",
        "after": {"clock_mhz": clock, "slowdowns": list(slowdowns)},
        "processes": {"before": sample(before), "after": sample(after)},
        "host": host or {"cpus": 16, "other_cpus": 0.2, "steal_cpus": 0.0},
    }


def test_another_process_on_the_gpu_is_contention_and_is_named() -> None:
    found = attribute("gemm.bf16.8192x8192x8192", evidence(clock=1410.0, after=[LOADER]), 1755.0, 0.18)
    assert found.category == "contention"
    assert "other processes used the GPU during the measurement: pid 4242 python3 (2.0 GiB)" in found.note
    assert "throttling" not in found.note  # the clock dropped too, but the other process explains it


def test_a_process_seen_only_before_the_measurement_still_counts() -> None:
    assert attribute("copy.device.2048mib", evidence(before=[LOADER]), 1755.0, 0.15).category == "contention"


def test_a_clock_drop_that_accounts_for_the_loss_is_throttling() -> None:
    found = attribute("gemm.bf16.8192x8192x8192", evidence(clock=1410.0, slowdowns=("sw-power-cap",)), 1755.0, 0.18)
    assert found.category == "throttling"
    assert (
        "clock 1410 MHz now vs 1755 MHz at baseline (-19.7%), limits active: sw-power-cap: the clock drop" in found.note
    )


def test_a_small_clock_dip_does_not_explain_a_large_loss() -> None:
    found = attribute("gemm.bf16.8192x8192x8192", evidence(clock=1680.0), 1755.0, 0.20)
    assert found.category == "performance" and "throttling" not in found.note
    assert "clock 1680 MHz now vs 1755 MHz at baseline (-4.3%)" in found.note


def test_a_thermal_limit_explains_a_loss_without_a_baseline_clock() -> None:
    assert (
        attribute("gemm.fp16.8192x8192x8192", evidence(clock=None, slowdowns=("hw-thermal",)), None, 0.2).category
        == "throttling"
    )
    # a power cap is normal at full load: alone it explains nothing
    assert (
        attribute("gemm.fp16.8192x8192x8192", evidence(clock=None, slowdowns=("sw-power-cap",)), None, 0.2).category
        == "performance"
    )


def test_a_loaded_host_is_contention_only_for_host_side_metrics() -> None:
    busy = {"cpus": 16, "other_cpus": 14.2, "steal_cpus": 3.1}
    found = attribute("launch.empty_kernel.host_us", evidence(host=busy), 1755.0, 0.3)
    assert (
        found.category == "contention"
        and "host CPUs: 14.2 of 16 busy with other work, 3.1 taken by the hypervisor" in found.note
    )
    assert attribute("gemm.bf16.8192x8192x8192", evidence(host=busy), 1755.0, 0.3).category == "performance"
    assert is_host_side("copy.h2d.pinned.512mib") and not is_host_side("copy.device.2048mib")


def test_clean_evidence_leaves_the_loss_to_the_stack() -> None:
    found = attribute("gemm.bf16.8192x8192x8192", evidence(), 1755.0, 0.12)
    assert found.category == "performance"
    assert "no other process on the GPU and clocks explain no loss: the stack is slower" in found.note


def test_an_unreadable_process_list_is_said_to_be_unknown() -> None:
    found = attribute("gemm.bf16.8192x8192x8192", evidence(unavailable="nvidia-ml-py is not installed"), 1755.0, 0.12)
    assert (
        found.category == "performance"
        and "other processes on the GPU: unknown (nvidia-ml-py is not installed)" in found.note
    )


def test_the_gate_message_names_the_process_and_leaves_out_the_rerecord_hint() -> None:
    metric = Metric(
        "gemm.bf16.8192x8192x8192", 600.0, "TFLOP/s", extra={"telemetry": evidence(clock=1410.0, after=[LOADER])}
    )
    judgement = gate.judge(
        metric, Baseline(731.0, "TFLOP/s", "higher", 0.004, clock_mhz=1755.0), Threshold(), "h100", RECORD
    )
    assert judgement.category == "contention" and "pid 4242 python3" in judgement.message
    assert "re-record" not in judgement.message
    clean = Metric("gemm.bf16.8192x8192x8192", 600.0, "TFLOP/s", extra={"telemetry": evidence()})
    slower = gate.judge(
        clean, Baseline(731.0, "TFLOP/s", "higher", 0.004, clock_mhz=1755.0), Threshold(), "h100", RECORD
    )
    assert (
        slower.category == "performance"
        and "re-record with pytest --rocm-suite=perf --update-baselines" in slower.message
    )


HELD_BACK = "rank 1 on GPU 1 (BDF 0000:00:07.0) holds the fsdp step back"
STEP = "train.fsdp.llama-3.1-8b-2l.2ranks.tokens_per_s_per_gpu"


def test_a_step_held_back_by_one_gpu_is_that_gpus_hardware_loss_not_the_stacks() -> None:
    found = attribute(STEP, {**evidence(), **held_back_by([1], HELD_BACK)}, 1755.0, 0.09)
    assert found.category == "hardware" and found.gpus == (1,)
    assert HELD_BACK in found.note and "drain and triage it" in found.note


def test_another_process_still_explains_a_loss_before_a_gpu_that_held_the_step_back() -> None:
    found = attribute(STEP, {**evidence(after=[LOADER]), **held_back_by([1], HELD_BACK)}, 1755.0, 0.09)
    assert found.category == "contention" and found.gpus == ()


def test_the_gate_blames_the_gpu_that_held_the_step_back_and_leaves_out_the_rerecord_hint() -> None:
    baseline = Baseline(8000.0, "tokens/s", "higher", 0.004)
    held = Metric(STEP, 7000.0, "tokens/s", extra={"telemetry": held_back_by([1], HELD_BACK)})
    judgement = gate.judge(held, baseline, Threshold(), "h200", RECORD)
    assert judgement.category == "hardware" and judgement.gpus == (1,) and "re-record" not in judgement.message
    plain = gate.judge(Metric(STEP, 7000.0, "tokens/s"), baseline, Threshold(), "h200", RECORD)
    assert plain.category == "performance" and plain.gpus == ()  # negative control: nothing held it back


# --- process lists as the libraries return them


def test_nvml_process_infos_become_named_processes_without_ours() -> None:
    own = os.getpid()
    infos = [
        SimpleNamespace(pid=own, usedGpuMemory=1 * GIB),
        SimpleNamespace(pid=4242, usedGpuMemory=2 * GIB),
        SimpleNamespace(pid=77, usedGpuMemory=2**64 - 1),
    ]

    def name(pid: int) -> bytes:
        if pid != 4242:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")  # a pid outside NVML's view: named from /proc, else unknown
        return b"/usr/bin/python3"

    nvml = SimpleNamespace(nvmlDeviceGetComputeRunningProcesses=lambda handle: infos, nvmlSystemGetProcessName=name)
    found = processes.others(processes.read_nvml_processes(nvml, "h"), own)
    assert found[0] == processes.GpuProcess(4242, "python3", 2 * GIB)
    assert found[1].pid == 77 and found[1].memory_bytes is None  # NVML_VALUE_NOT_AVAILABLE


def test_amdsmi_process_lists_of_either_release_become_processes() -> None:
    rocm7 = {
        "name": "python3",
        "pid": 4242,
        "mem": 3 * GIB,
        "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": 2 * GIB},
    }
    amdsmi = SimpleNamespace(
        amdsmi_get_gpu_process_list=lambda handle: [rocm7, "proc-handle"],
        amdsmi_get_gpu_process_info=lambda handle, p: {"name": "N/A", "pid": 99, "mem": 512},
    )
    found = processes.read_amdsmi_processes(amdsmi, "h")
    assert found == [processes.GpuProcess(4242, "python3", 2 * GIB), processes.GpuProcess(99, "unknown", 512)]


def _fake_pynvml(process_list) -> types.ModuleType:
    pynvml = types.ModuleType("pynvml")
    pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM, pynvml.NVML_TEMPERATURE_GPU = 1, 2, 0
    pynvml.nvmlInit = pynvml.nvmlShutdown = lambda: None
    pynvml.nvmlDeviceGetHandleByPciBusId = lambda bus: "handle"
    pynvml.nvmlDeviceGetClockInfo = lambda h, kind: 1755
    pynvml.nvmlDeviceGetTemperature = lambda h, kind: 60
    pynvml.nvmlDeviceGetPowerUsage = lambda h: 690_000
    pynvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0
    pynvml.nvmlDeviceGetComputeRunningProcesses = process_list
    pynvml.nvmlSystemGetProcessName = lambda pid: "python3"
    return pynvml


H100 = DeviceInfo(
    backend="cuda",
    index=0,
    name="NVIDIA H100 80GB HBM3",
    arch="sm_90",
    device_key="h100",
    pci_bus_id="00000000:19:00.0",
)


def test_telemetry_reads_the_other_processes_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(lambda h: [SimpleNamespace(pid=4242, usedGpuMemory=GIB)]))
    source = telemetry.open_telemetry(H100, env={})
    assert source.processes().to_dict() == {"processes": [{"pid": 4242, "name": "python3", "memory_bytes": GIB}]}


def test_a_process_list_the_library_refuses_is_unavailable_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(handle):
        raise RuntimeError("NVML_ERROR_NO_PERMISSION")

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(refused))
    source = telemetry.open_telemetry(H100, env={})
    assert source.processes().to_dict() == {
        "processes": None,
        "unavailable": "nvidia-ml-py process list: RuntimeError: NVML_ERROR_NO_PERMISSION",
    }
    assert source.sample().clock_mhz == 1755  # the other readings go on
    assert telemetry.NoTelemetry("amdsmi is not installed").processes().unavailable == "amdsmi is not installed"


# --- host load from /proc


STAT = "cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\ncpu2 0 0 0 0\ncpu3 0 0 0 0\n"


def test_host_load_counts_other_work_apart_from_ours() -> None:
    before = processes.parse_cpu_times(STAT.format(busy=1000, idle=1000, steal=0))
    after = processes.parse_cpu_times(STAT.format(busy=1300, idle=1100, steal=40))
    load = processes.host_load(before, after, own_cpu_s=1.0, wall_s=1.0, load_average=3.5)
    assert load.cpus == 4 and load.busy_cpus == pytest.approx(4 * 340 / 440)
    assert load.other_cpus == pytest.approx(4 * 340 / 440 - 1.0) and load.steal_cpus == pytest.approx(4 * 40 / 440)


def test_an_unreadable_proc_stat_is_recorded_as_unavailable(tmp_path: Path) -> None:
    assert "/proc/stat unreadable" in processes.HostLoadMeter(tmp_path).start().finish().unavailable
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "stat").write_text("intr 1 2 3\n")
    assert "expected a 'cpu' line first" in processes.HostLoadMeter(tmp_path).start().finish().unavailable


def test_the_host_load_meter_reads_this_machine() -> None:
    load = processes.HostLoadMeter().start().finish()
    assert load.unavailable or (load.cpus and load.busy_cpus is not None)


def test_on_the_cpu_other_work_of_a_busy_process_is_contention_as_another_process_on_a_gpu() -> None:
    """'host CPUs: 1.0 of 2 busy with other work' (0.96 of 2: under half the host) was blamed on the image."""
    on_cpu = {**evidence(clock=None, host={"cpus": 2, "other_cpus": 0.96}), "host_bound": True}
    found = attribute("gemm.bf16.128x128x128", on_cpu, None, 0.3)
    assert found.category == "contention" and "host CPUs: 1.0 of 2 busy with other work" in found.note


def test_on_an_idle_cpu_a_loss_stays_the_stacks() -> None:
    """The negative control: background work of an idle CI VM is no contention."""
    idle = {**evidence(clock=None, host={"cpus": 2, "other_cpus": 0.08}), "host_bound": True}
    assert attribute("gemm.bf16.128x128x128", idle, None, 0.3).category == "performance"


def test_a_gpus_host_side_metric_keeps_the_share_rule() -> None:
    """On a GPU node, a busy process beside a launch-latency measurement on 16 CPUs is no loaded host."""
    beside = evidence(host={"cpus": 16, "other_cpus": 1.0})
    assert attribute("launch.empty_kernel.host_us", beside, 1755.0, 0.3).category == "performance"
