"""Preflight readers and checks on fake host trees (an AMD Instinct node, an H100 node, a container
without /sys), and the real preflight suite run against them with --rocm-host-root."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import pytest
from fake_host import H100_CLASS, FakeGpu, FakeHost

from rocm_validate.preflight import checks, host, ras

REPO = Path(__file__).resolve().parents[1]


def tree(tmp_path: Path, **changes) -> Path:
    return FakeHost(**changes).write(tmp_path / "host")


def gpus(root: Path) -> list[host.PciGpu]:
    found, problem = host.pci_gpus(root)
    assert not problem
    return found


def test_the_gpus_are_found_on_the_pci_bus_and_other_devices_are_not(tmp_path: Path) -> None:
    found = gpus(tree(tmp_path))
    assert [(g.address, g.vendor) for g in found] == [("0000:0c:00.0", "amd"), ("0000:1f:00.0", "amd")]


def test_a_host_without_sysfs_says_so(tmp_path: Path) -> None:
    found, problem = host.pci_gpus(tree(tmp_path, sysfs=False))
    assert found == [] and "sys/bus/pci/devices unreadable" in problem and "no sysfs here" in problem


def test_numa_auto_balancing_on_fails_on_an_amd_host_and_is_reported_on_nvidia(tmp_path: Path) -> None:
    value = host.read(tree(tmp_path, numa_balancing="1"), "proc/sys/kernel/numa_balancing")
    finding = checks.numa_balancing(value, {"amd"})
    assert finding.status == "fail" and finding.expected == "0 (off)" and finding.found.startswith("1 in ")
    assert "AMD Instinct MI300X system optimization guide" in finding.source
    assert checks.numa_balancing(value, {"nvidia"}).status == "warn"
    assert checks.numa_balancing(host.Read("0", "/proc/sys/kernel/numa_balancing"), {"amd"}).status == "pass"
    unreadable = checks.numa_balancing(host.read(tmp_path / "nowhere", "proc/sys/kernel/numa_balancing"), {"amd"})
    assert unreadable.status == "skip" and "cannot read" in unreadable.found


def test_the_iommu_check_names_what_the_kernel_command_line_is_missing(tmp_path: Path) -> None:
    root = tree(tmp_path, cmdline="BOOT_IMAGE=/vmlinuz ro amd_iommu=on")
    finding = checks.iommu(host.read(root, "proc/cmdline"), {"amd"}, host.cpu_vendor(root))
    assert finding.status == "fail" and finding.found == "amd_iommu=on; missing pci=realloc=off iommu=pt"
    assert "ROCm/system-acceptance-docs" in finding.source
    healthy = tree(tmp_path / "ok")
    assert checks.iommu(host.read(healthy, "proc/cmdline"), {"amd"}, "AuthenticAMD").status == "pass"
    # an Intel CPU is not asked for amd_iommu=on; an NVIDIA host is not asked at all
    assert (
        checks.iommu(host.Read("pci=realloc=off iommu=pt", "/proc/cmdline"), {"amd"}, "GenuineIntel").status == "pass"
    )
    assert checks.iommu(host.Read("ro", "/proc/cmdline"), {"nvidia"}, "GenuineIntel").status == "skip"


@pytest.mark.parametrize(
    ("vendor", "link", "status"),
    [
        ("0x1002", ("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"), "pass"),
        ("0x1002", ("32.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "16"), "fail"),  # a narrower link: seating or riser
        ("0x1002", ("16.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"), "fail"),
        ("0x10de", ("2.5 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"), "warn"),  # NVIDIA trains down at idle
        ("0x10de", ("Unknown", "255", "Unknown", "255"), "skip"),  # a VM's virtual link
    ],
)
def test_each_gpu_link_is_compared_with_its_maximum(tmp_path: Path, vendor: str, link: tuple, status: str) -> None:
    root = tree(
        tmp_path, gpus=[FakeGpu(vendor=vendor, pci_class=H100_CLASS if vendor == "0x10de" else "0x120000", link=link)]
    )
    gpu = gpus(root)[0]
    finding = checks.pcie_link(gpu, host.read_link(gpu))
    assert (finding.status, finding.subject) == (status, "0000:0c:00.0")
    if status == "fail":
        assert finding.expected == "32 GT/s x16" and "32 GT/s x16" in finding.source and finding.category == "hardware"


def test_link_speeds_and_widths_parse_in_every_kernel_form() -> None:
    assert [host.parse_speed(t) for t in ("32.0 GT/s PCIe", "16 GT/s", "8.0 GT/s", "Unknown", None)] == [
        32.0,
        16.0,
        8.0,
        None,
        None,
    ]
    assert [host.parse_width(t) for t in ("16", "x8", "255", "0", "")] == [16, 8, None, None, None]


def test_amd_ras_counts_fail_on_uncorrectable_and_report_correctable(tmp_path: Path) -> None:
    ras_files = {"umc": "ue: 2\nce: 5\n", "gfx": "ue: 0\nce: 0\n"}
    root = tree(
        tmp_path,
        gpus=[
            FakeGpu(ras=ras_files),
            FakeGpu("0000:1f:00.0", ras={"umc": "ue: 0\nce: 1\n"}),
            FakeGpu("0000:2f:00.0", ras=None),
        ],
    )
    counts, problems = ras.read_counts(gpus(root))
    assert counts["0000:0c:00.0"] == {"gfx.ue": 0, "gfx.ce": 0, "umc.ue": 2, "umc.ce": 5}
    assert problems == ["0000:2f:00.0: amdgpu exposes no ras/ folder (RAS off or unsupported on this device)"]
    findings = {f.subject: f for f in checks.ras_counts(counts, problems)}
    assert findings["0000:0c:00.0"].status == "fail" and findings["0000:0c:00.0"].found == "umc.ue 2, umc.ce 5"
    assert findings["0000:1f:00.0"].status == "warn" and findings[""].status == "skip"


def test_a_counter_that_rose_during_the_run_fails_as_hardware() -> None:
    before = {"0000:0c:00.0": {"umc.ce": 0, "umc.ue": 0}, "0000:1f:00.0": {"umc.ce": 1}}
    after = {"0000:0c:00.0": {"umc.ce": 3, "umc.ue": 0}, "0000:1f:00.0": {"umc.ce": 1}}
    findings = {f.subject: f for f in checks.ras_rise(before, after)}
    assert findings["0000:0c:00.0"].status == "fail" and findings["0000:0c:00.0"].found == "umc.ce 0 -> 3"
    assert findings["0000:1f:00.0"].status == "pass" and findings["0000:1f:00.0"].category == "hardware"


class NVMLError(Exception):
    pass


def fake_pynvml(supported: bool = True) -> SimpleNamespace:
    """nvidia-ml-py's ECC and row-remapping calls for one H100; `supported=False` is a guest with ECC hidden."""

    def ecc(handle, kind, counter):
        if not supported:
            raise NVMLError("Not Supported")
        return {(0, 0): 4, (1, 0): 0, (1, 1): 1}[(kind, counter)]

    return SimpleNamespace(
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_VOLATILE_ECC=0,
        NVML_AGGREGATE_ECC=1,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: "h0",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=b"00000000:19:00.0"),
        nvmlDeviceGetTotalEccErrors=ecc,
        nvmlDeviceGetRemappedRows=lambda h: (0, 1, 0, 0),
    )


def test_nvidia_ecc_counters_come_from_nvml_and_a_refusal_is_a_reason(tmp_path: Path) -> None:
    h100 = gpus(tree(tmp_path, gpus=[FakeGpu(vendor="0x10de", pci_class=H100_CLASS, ras=None)]))
    counts, problems = ras.read_counts(h100, import_module=lambda name: fake_pynvml())
    assert counts == {
        "00000000:19:00.0": {
            "volatile.corrected": 4,
            "volatile.uncorrected": 0,
            "lifetime.uncorrected_seen": 1,
            "rows.remap_pending": 0,
            "rows.remap_failure": 0,
        }
    }
    assert (
        problems == [] and checks.ras_counts(counts)[0].status == "warn"
    )  # corrected and lifetime counts are reported
    counts, problems = ras.read_counts(h100, import_module=lambda name: fake_pynvml(supported=False))
    assert "00000000:19:00.0: NVML refused volatile.corrected (NVMLError: Not Supported)" in problems[0]

    def missing(name: str):
        raise ModuleNotFoundError(name)

    assert "pip install rocm-validate[nvidia]" in ras.read_counts(h100, import_module=missing)[1][0]


def test_kernel_messages_with_amdgpu_errors_or_xids_fail(tmp_path: Path) -> None:
    kmsg = (
        "6,1,100,-;amdgpu 0000:0c:00.0: amdgpu: SMU is initialized successfully!\n"
        " SUBSYSTEM=pci\n"
        "3,2,200,-;amdgpu 0000:1f:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1, emitted seq=2\n"
        "4,3,300,-;NVRM: Xid (PCI:0000:19:00): 79, pid=1234, GPU has fallen off the bus.\n"
    )
    finding = checks.kernel_messages(host.read_kernel_messages(tree(tmp_path, kmsg=kmsg)))
    assert (
        finding.status == "fail"
        and finding.category == "hardware"
        and finding.found.startswith("2 GPU error line(s): amdgpu 0000:1f:00.0")
    )
    clean = checks.kernel_messages(host.read_kernel_messages(tree(tmp_path / "ok")))
    assert clean.status == "pass" and clean.found == "no GPU errors in 1 lines"
    hidden = checks.kernel_messages(host.Read(None, "/dev/kmsg", "cannot read /dev/kmsg: Operation not permitted"))
    assert hidden.status == "skip" and "dmesg_restrict" in hidden.found


def test_every_gpu_on_the_same_firmware_passes_and_a_stray_one_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path, gpus=[FakeGpu(), FakeGpu("0000:1f:00.0", firmware={"mec": "0x0000009c", "sos": "0x00270082"})]
    )
    firmware = {g.address: host.read_firmware(g) for g in gpus(root)}
    findings = {f.check: f for f in checks.driver_and_firmware({"amd": host.driver_version(root, "amd")}, firmware)}
    assert findings["driver_version"].found.startswith("amd 6.8.5")
    assert findings["firmware_versions"].status == "fail"
    assert findings["firmware_versions"].found == "mec: 0000:0c:00.0 0x0000009d, 0000:1f:00.0 0x0000009c"
    same = {a: {"mec": "0x9d"} for a in ("0000:0c:00.0", "0000:1f:00.0")}
    assert checks.driver_and_firmware({}, same)[0].found == "2 GPU(s) on mec 0x9d"


def test_driver_versions_are_read_for_either_vendor(tmp_path: Path) -> None:
    root = tree(tmp_path, amdgpu_version=None)
    assert host.driver_version(root, "amd").text == "in-tree with kernel 6.8.0-45-generic"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U22)\n"
    )
    assert host.driver_version(root, "nvidia").text == "580.65.06"


def test_large_pages_and_locked_memory_are_reported_with_their_expectations(tmp_path: Path) -> None:
    root = tree(tmp_path, transparent_hugepage="always madvise [never]", memlock="8388608")
    thp = checks.large_pages(
        host.read(root, "sys/kernel/mm/transparent_hugepage/enabled"), host.read(root, "proc/meminfo")
    )
    assert (thp.status, thp.found) == ("warn", "transparent huge pages never, 0 reserved huge pages")
    limit = checks.memlock(host.memlock_limit(root))
    assert (limit.status, limit.found, limit.expected) == ("warn", "8 MiB", "unlimited")
    assert checks.memlock(host.memlock_limit(tree(tmp_path / "ok"))).status == "pass"


def test_a_finding_refuses_an_unknown_status() -> None:
    with pytest.raises(ValueError, match="status must be one of pass, warn, fail, skip"):
        checks.Finding("x", "bad", "-", "-", "-")


# --- the preflight suite end to end


def run_suite(pytester: pytest.Pytester, root: Path, *args: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest(
        str(REPO / "suites" / "preflight"),
        f"--rootdir={REPO}",
        "--rocm-suite=preflight",
        "--rocm-device=cpu",
        f"--rocm-host-root={root}",
        f"--rocm-report={pytester.path / 'report.json'}",
        "-p",
        "no:cacheprovider",
        *args,
    )
    return result, json.loads((pytester.path / "report.json").read_text())


def test_a_healthy_amd_host_passes_preflight_and_reports_its_facts(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result, report = run_suite(pytester, tree(tmp_path))
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [
            "*rocm-validate preflight*",
            "*pass  numa_balancing (host): 0 in *; expected 0 (off)*",
            "*pass  pcie_link (0000:1f:00.0): 32 GT/s x16; expected 32 GT/s x16*",
            "rocm-validate verdict: pass: every check that ran passed on the host",
        ]
    )
    findings = [f for t in report["tests"] for f in t["findings"]]
    assert {f["check"] for f in findings} >= {
        "numa_balancing",
        "iommu_passthrough",
        "pcie_link",
        "ras_error_counts",
        "ras_unchanged",
        "kernel_messages",
        "driver_version",
        "firmware_versions",
        "large_pages",
        "memlock_limit",
    }
    assert report["tests"][-1]["nodeid"].endswith("test_no_gpu_error_counter_rose_during_the_run")


def test_a_misconfigured_host_fails_as_configuration_with_the_verdict_to_fix_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    result, report = run_suite(pytester, tree(tmp_path, numa_balancing="1"), "--junitxml=out.xml")
    assert result.ret == 1
    failed = [t for t in report["tests"] if t["outcome"] == "failed"]
    assert [(t["nodeid"].split("::")[-1], t["category"]) for t in failed] == [
        ("test_numa_auto_balancing_is_off", "configuration")
    ]
    assert "numa_balancing (host): fail: found 1 in" in failed[0]["message"]
    assert report["verdict"].startswith(
        "rocm-validate verdict: host configuration: fix the settings the preflight checks name"
    )
    result.stdout.fnmatch_lines(
        ["rocm-validate preflight: * 1 failed (configuration: 1)*", "rocm-validate verdict: host configuration*"]
    )
    properties = ElementTree.parse(pytester.path / "out.xml").getroot().iter("property")
    assert ("rocm_category", "configuration") in {(p.get("name"), p.get("value")) for p in properties}


def test_a_degraded_link_fails_as_hardware_and_drains_the_node(pytester: pytest.Pytester, tmp_path: Path) -> None:
    degraded = FakeGpu("0000:1f:00.0", link=("32.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "16"))
    result, report = run_suite(pytester, tree(tmp_path, gpus=[FakeGpu(), degraded]))
    failed = {t["nodeid"].split("::")[-1]: t for t in report["tests"] if t["outcome"] == "failed"}
    assert list(failed) == ["test_every_gpu_link_runs_at_its_maximum_speed_and_width"]
    assert failed["test_every_gpu_link_runs_at_its_maximum_speed_and_width"]["category"] == "hardware"
    assert "pcie_link (0000:1f:00.0): fail: found 32 GT/s x8, expected 32 GT/s x16" in result.stdout.str()
    assert "host hardware: drain the node and triage (hardware: 1)" in report["verdict"]


def test_a_container_without_sys_skips_with_reasons_and_passes(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result, report = run_suite(pytester, tree(tmp_path, sysfs=False), "-rs")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        ["*needs a GPU on the PCI bus, found */sys/bus/pci/devices unreadable (*): no sysfs here*"]
    )
    assert {t["outcome"] for t in report["tests"]} <= {"passed", "skipped"}


def test_a_missing_host_root_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = pytester.runpytest(
        str(REPO / "suites" / "preflight"),
        f"--rootdir={REPO}",
        "--rocm-suite=preflight",
        f"--rocm-host-root={tmp_path / 'nowhere'}",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rocm-host-root=*nowhere*: no such folder*"])


def test_all_runs_preflight_first_and_the_end_of_run_check_last() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rocm-suite=all",
            "--rocm-device=cpu",
            "--co",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    preflight = [i for i in ids if i.startswith("suites/preflight/")]
    assert ids[: len(preflight) - 1] == preflight[:-1] and len(preflight) == 9
    assert ids[-1].endswith("test_no_gpu_error_counter_rose_during_the_run")


def test_a_host_root_without_proc_and_sys_cannot_be_checked_and_says_how_to_mount_them(tmp_path: Path) -> None:
    from rocm_validate.preflight.plugin import strict_root_problem

    (tmp_path / "proc").mkdir()
    problem = strict_root_problem(tmp_path)
    assert problem is not None and problem.startswith(f"--rocm-host-root={tmp_path} holds no sys/, so")
    assert "-v /sys:/host/sys:ro" in problem
    (tmp_path / "sys").mkdir()
    assert strict_root_problem(tmp_path) is None
