"""Preflight decisions: facts about the host (read by `host.py` and `ras.py`) in, findings out.

Each finding states the expected value, what was found and the source of the expectation, and
its status: `pass`, `warn` (off the guidance but harmless for most work: reported, never failed),
`fail` (with the category a failure means: `configuration` for host settings, `hardware` for a
link, an error counter or a kernel error about a GPU) or `skip` (the fact could not be read, or
the check does not apply, with the reason). Pure functions, unit-tested with fake facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rocm_validate.preflight.host import Link, PciGpu, Read, selected_mode

STATUSES = ("pass", "warn", "fail", "skip")

# Where each expectation comes from (reference/node-validation-facts.md and the vendors' guides).
AMD_TUNING = "AMD Instinct MI300X system optimization guide (rocm.docs.amd.com): disable NUMA auto-balancing"
AMD_ACCEPTANCE = "AMD MI300X system acceptance (ROCm/system-acceptance-docs docs/gpus/mi300x.md)"
LINK_SOURCE = f"sysfs max_link_speed / max_link_width; {AMD_ACCEPTANCE}: PCIe at 32 GT/s x16"
RAS_SOURCE = "DCGM and RVS: a GPU with uncorrectable memory errors, or counts that rise under load, is drained"
KMSG_SOURCE = f"{AMD_ACCEPTANCE}: no amdgpu errors in dmesg; NVIDIA Xid errors (docs.nvidia.com, Xid catalog)"
MEMLOCK_SOURCE = "RCCL / NCCL RDMA transports register host memory: their docs ask for 'ulimit -l unlimited'"
THP_SOURCE = "Linux admin-guide/mm/transhuge: 'never' turns transparent huge pages off for every process"
NO_GPU = "found no AMD or NVIDIA GPU on the PCI bus"


@dataclass(frozen=True)
class Finding:
    """One preflight check's result on the host or on one GPU (`subject`: its PCI address)."""

    check: str
    status: str
    expected: str
    found: str
    source: str
    subject: str = ""
    category: str = "configuration"  # what a failure means (rocm_validate.results.triage)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}; found {self.status!r}")

    def line(self) -> str:
        """'numa_balancing (host): fail: found 1, expected 0 [AMD Instinct ... guide]'."""
        return f"{self.check} ({self.subject or 'host'}): {self.status}: found {self.found}, expected {self.expected} [{self.source}]"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["category"]
        return data


def skipped(check: str, reason: str, source: str = "", subject: str = "") -> Finding:
    return Finding(check, "skip", "-", reason, source, subject)


def numa_balancing(value: Read, vendors: set[str]) -> Finding:
    """NUMA auto-balancing off (0): AMD asks for it on Instinct hosts; elsewhere it is reported."""
    check = "numa_balancing"
    if value.text is None:
        return skipped(check, value.problem, AMD_TUNING)
    if not vendors:
        return skipped(check, f"applies to GPU hosts; {NO_GPU} (numa_balancing is {value.text})", AMD_TUNING)
    on = value.text != "0"
    status = ("fail" if "amd" in vendors else "warn") if on else "pass"
    return Finding(check, status, "0 (off)", f"{value.text} in {value.source}", AMD_TUNING)


def iommu(cmdline: Read, vendors: set[str], cpu: str | None) -> Finding:
    """The kernel command line AMD's acceptance asks for on Instinct hosts: pci=realloc=off
    iommu=pt, and amd_iommu=on with an AMD CPU."""
    check = "iommu_passthrough"
    wanted = ["pci=realloc=off", *(["amd_iommu=on"] if cpu == "AuthenticAMD" else []), "iommu=pt"]
    source = f"{AMD_ACCEPTANCE}: kernel command line pci=realloc=off amd_iommu=on iommu=pt"
    if cmdline.text is None:
        return skipped(check, cmdline.problem, source)
    words = cmdline.text.split()
    present = [w for w in words if "iommu" in w or w.startswith("pci=")]
    found = " ".join(present) or "no iommu or pci= settings"
    if "amd" not in vendors:
        reason = f"AMD's guidance is for AMD Instinct hosts; {NO_GPU if not vendors else 'found ' + ', '.join(sorted(vendors))} ({found})"
        return skipped(check, reason, source)
    missing = [w for w in wanted if w not in words]
    return Finding(
        check,
        "fail" if missing else "pass",
        " ".join(wanted),
        found + (f"; missing {' '.join(missing)}" if missing else ""),
        source,
    )


def pcie_link(gpu: PciGpu, link: Link) -> Finding:
    """A GPU's link trained at its maximum speed and width. A narrower link is a seating, riser or
    slot fault; a slower one too on AMD. NVIDIA GPUs lower the link speed when idle to save
    power, so there a slower link is reported, and the perf suite's pinned copies measure it."""
    check = "pcie_link"
    values = (link.current_speed, link.current_width, link.max_speed, link.max_width)
    if None in values:
        return skipped(
            check,
            f"sysfs shows no usable link ({link.problem or 'unknown speed or width: a virtual link?'})",
            LINK_SOURCE,
            gpu.address,
        )
    now = f"{link.current_speed:g} GT/s x{link.current_width}"
    expected = f"{link.max_speed:g} GT/s x{link.max_width}"
    if link.current_width < link.max_width:  # type: ignore[operator]
        status = "fail"
    elif link.current_speed < link.max_speed:  # type: ignore[operator]
        status = "fail" if gpu.vendor == "amd" else "warn"
        now += " (NVIDIA GPUs train down at idle)" if gpu.vendor == "nvidia" else ""
    else:
        status = "pass"
    return Finding(check, status, expected, now, LINK_SOURCE, gpu.address, "hardware")


def _uncorrectable(counter: str) -> bool:
    return counter.endswith((".ue", "uncorrected", "uncorrectable", "remap_failure", "remap_pending"))


def ras_counts(counts: Mapping[str, Mapping[str, int]], problems: Iterable[str] = ()) -> list[Finding]:
    """Per GPU: no uncorrectable errors (fail otherwise); correctable ones are reported (warn)
    and must not rise during the run (`ras_rise`)."""
    check = "ras_error_counts"
    findings = [skipped(check, problem, RAS_SOURCE) for problem in problems]
    for subject, found in sorted(counts.items()):
        bad = {k: v for k, v in found.items() if v and _uncorrectable(k)}
        corrected = {k: v for k, v in found.items() if v and not _uncorrectable(k)}
        status = "fail" if bad else "warn" if corrected else "pass"
        shown = ", ".join(f"{k} {v}" for k, v in {**bad, **corrected}.items()) or f"all {len(found)} counters 0"
        findings.append(
            Finding(
                check,
                status,
                "0 uncorrectable; correctable ones unchanged during the run",
                shown,
                RAS_SOURCE,
                subject,
                "hardware",
            )
        )
    return findings


def ras_rise(before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]) -> list[Finding]:
    """Per GPU read both times: every counter unchanged since the run began."""
    findings = []
    for subject in sorted(set(before) & set(after)):
        rose = {
            k: (before[subject][k], v)
            for k, v in after[subject].items()
            if k in before[subject] and v > before[subject][k]
        }
        shown = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in rose.items()) or "unchanged"
        findings.append(
            Finding(
                "ras_unchanged",
                "fail" if rose else "pass",
                "no counter rose during the run",
                shown,
                RAS_SOURCE,
                subject,
                "hardware",
            )
        )
    return findings


_XID = re.compile(r"NVRM: Xid \(PCI:([^)]+)\): (\d+)")
_AMDGPU_ERROR = re.compile(
    r"amdgpu.*\b(error|fail(ed|ure)?|timeout|timed out|fatal|hang|reset|uncorrect\w*|poison\w*)\b|\*ERROR\*.*amdgpu",
    re.I,
)


def kernel_errors(text: str) -> list[str]:
    """Kernel message lines reporting an NVIDIA Xid or an amdgpu error (timeouts, resets, RAS)."""
    return [line.strip() for line in text.splitlines() if _XID.search(line) or _AMDGPU_ERROR.search(line)]


def kernel_messages(messages: Read) -> Finding:
    """No amdgpu errors and no Xid in the kernel's messages (since boot)."""
    check = "kernel_messages"
    if messages.text is None:
        return skipped(check, f"{messages.problem} (needs root or kernel.dmesg_restrict=0)", KMSG_SOURCE)
    errors = kernel_errors(messages.text)
    shown = "; ".join(errors[:5]) + (f"; ... {len(errors) - 5} more" if len(errors) > 5 else "")
    found = (
        f"{len(errors)} GPU error line(s): {shown}"
        if errors
        else f"no GPU errors in {len(messages.text.splitlines())} lines"
    )
    return Finding(
        check, "fail" if errors else "pass", "no amdgpu errors, no NVIDIA Xid", found, KMSG_SOURCE, category="hardware"
    )


def driver_and_firmware(drivers: Mapping[str, Read], firmware: Mapping[str, Mapping[str, str]]) -> list[Finding]:
    """The driver version per vendor (reported), and every GPU on the same firmware: a GPU whose
    firmware differs from its peers' was missed by an update."""
    source = "the node's own GPUs: one firmware set for all"
    findings = [
        Finding("driver_version", "pass", "a loaded driver", f"{vendor} {read.text} ({read.source})", read.source)
        if read.text
        else skipped("driver_version", read.problem, read.source)
        for vendor, read in sorted(drivers.items())
    ]
    sets = {subject: dict(versions) for subject, versions in firmware.items() if versions}
    if not sets:
        return findings
    names = sorted({name for versions in sets.values() for name in versions})
    odd = {
        n: {s: v.get(n, "missing") for s, v in sets.items()}
        for n in names
        if len({v.get(n, "missing") for v in sets.values()}) > 1
    }
    first = next(iter(sets.values()))
    found = "; ".join(f"{n}: " + ", ".join(f"{s} {v}" for s, v in sorted(by.items())) for n, by in odd.items()) or (
        f"{len(sets)} GPU(s) on " + ", ".join(f"{n} {first[n]}" for n in names[:8]) + (" ..." if len(names) > 8 else "")
    )
    return [
        *findings,
        Finding("firmware_versions", "fail" if odd else "pass", "the same versions on every GPU", found, source),
    ]


def large_pages(transparent: Read, meminfo: Read) -> Finding:
    """Transparent huge pages not turned off ('always' or 'madvise'); reserved huge pages reported."""
    check = "large_pages"
    if transparent.text is None:
        return skipped(check, transparent.problem, THP_SOURCE)
    mode = selected_mode(transparent.text) or transparent.text
    reserved = re.search(r"^HugePages_Total:\s*(\d+)", meminfo.text or "", re.M)
    found = f"transparent huge pages {mode}" + (f", {reserved.group(1)} reserved huge pages" if reserved else "")
    return Finding(check, "warn" if mode == "never" else "pass", "always or madvise", found, THP_SOURCE)


def memlock(limit: Read) -> Finding:
    """Locked-memory limit of this process: unlimited for RDMA collectives (reported otherwise)."""
    check = "memlock_limit"
    if limit.text is None:
        return skipped(check, limit.problem, MEMLOCK_SOURCE)
    found = limit.text if limit.text == "unlimited" else f"{int(limit.text) / 1024**2:g} MiB"
    return Finding(check, "pass" if limit.text == "unlimited" else "warn", "unlimited", found, MEMLOCK_SOURCE)
