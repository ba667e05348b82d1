"""Readers of host facts under a root folder: /proc, /sys and /dev/kmsg as the kernel shows them.

Every reader takes the root, so tests pass a fake tree and a container can point at the host's
files mounted elsewhere (`--rocm-host-root`). A fact that cannot be read comes back with the
reason (`Read.problem`), never as an exception: a container without /sys, a kernel that restricts
/dev/kmsg, macOS.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

PCI_DEVICES = "sys/bus/pci/devices"
VENDORS = {"0x1002": "amd", "0x10de": "nvidia"}
# PCI classes of GPUs: VGA (0x0300), 3D controller (0x0302, NVIDIA data center), other display
# (0x0380), processing accelerator (0x1200, AMD Instinct).
GPU_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")
KMSG_LIMIT_BYTES = 16 * 1024 * 1024  # /dev/kmsg keeps the kernel's ring buffer; stop well past its size


@dataclass(frozen=True)
class Read:
    """A fact read from a file under the root: its text, where it came from, or why it is unknown."""

    text: str | None
    source: str
    problem: str = ""


def shown(root: Path, relative: str) -> str:
    """The path a person looks at: '/proc/cmdline' on the host itself, the full path under another root."""
    return f"/{relative}" if root == Path("/") else str(root / relative)


def read(root: Path, relative: str) -> Read:
    """One file's stripped text, or the reason it could not be read."""
    source = shown(root, relative)
    try:
        return Read((root / relative).read_text(errors="replace").strip(), source)
    except OSError as exc:
        return Read(None, source, f"cannot read {source}: {exc.strerror or exc}")


@dataclass(frozen=True)
class PciGpu:
    """A GPU on the PCI bus, as sysfs lists it."""

    address: str  # '0000:0c:00.0'
    vendor: str  # 'amd' or 'nvidia'
    path: Path  # its sysfs folder


def pci_gpus(root: Path) -> tuple[list[PciGpu], str]:
    """The AMD and NVIDIA GPUs under /sys/bus/pci/devices, and why none could be listed ('' if read)."""
    folder = root / PCI_DEVICES
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        return (
            [],
            f"{shown(root, PCI_DEVICES)} unreadable ({exc.strerror or exc}): no sysfs here (a container without /sys, or not Linux)",
        )
    found = []
    for entry in entries:
        vendor = read(entry, "vendor").text or ""
        pci_class = read(entry, "class").text or ""
        if vendor.lower() in VENDORS and pci_class.lower().startswith(GPU_CLASSES):
            found.append(PciGpu(entry.name, VENDORS[vendor.lower()], entry))
    return found, ""


@dataclass(frozen=True)
class Link:
    """A PCIe link as sysfs reports it: speed in GT/s and width in lanes, current and maximum."""

    current_speed: float | None
    current_width: int | None
    max_speed: float | None
    max_width: int | None
    problem: str = ""


def parse_speed(text: str | None) -> float | None:
    """'32.0 GT/s PCIe' or '16 GT/s' -> 32.0 / 16.0; 'Unknown' (a VM's virtual link) -> None."""
    match = re.match(r"\s*([0-9.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def parse_width(text: str | None) -> int | None:
    """'16' -> 16; 'x16' -> 16; '255' or '0' (unknown) -> None."""
    match = re.fullmatch(r"\s*x?(\d+)\s*", text or "")
    width = int(match.group(1)) if match else None
    return width if width and width <= 32 else None


def read_link(gpu: PciGpu) -> Link:
    values = {
        name: read(gpu.path, name)
        for name in ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
    }
    problems = [r.problem for r in values.values() if r.problem]
    return Link(
        parse_speed(values["current_link_speed"].text),
        parse_width(values["current_link_width"].text),
        parse_speed(values["max_link_speed"].text),
        parse_width(values["max_link_width"].text),
        "; ".join(problems),
    )


def parse_ras_count(text: str) -> dict[str, int]:
    """amdgpu's ras/<block>_err_count: 'ue: 0\\nce: 3' -> {'ue': 0, 'ce': 3}."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(ue|ce|de)\s*:\s*(\d+)", text, re.M)}


def read_amd_ras(gpu: PciGpu) -> tuple[dict[str, int], str]:
    """Uncorrectable and correctable error counts per RAS block ('umc.ue': 0, 'gfx.ce': 2, ...)
    from amdgpu's sysfs ras/ folder, and why they are unknown ('' when read)."""
    folder = gpu.path / "ras"
    try:
        files = sorted(p for p in folder.iterdir() if p.name.endswith("_err_count"))
    except OSError:
        return {}, f"{gpu.address}: amdgpu exposes no ras/ folder (RAS off or unsupported on this device)"
    counts = {}
    for path in files:
        block = path.name.removesuffix("_err_count")
        try:
            for kind, value in parse_ras_count(path.read_text()).items():
                counts[f"{block}.{kind}"] = value
        except OSError as exc:
            return {}, f"{gpu.address}: cannot read ras/{path.name}: {exc.strerror or exc}"
    return counts, "" if counts else f"{gpu.address}: ras/ holds no error counts"


def read_firmware(gpu: PciGpu) -> dict[str, str]:
    """amdgpu's firmware versions (fw_version/*_fw_version) and the VBIOS, where sysfs shows them."""
    versions = {}
    try:
        for path in sorted((gpu.path / "fw_version").iterdir()):
            text = read(path.parent, path.name).text
            if text:
                versions[path.name.removesuffix("_fw_version")] = text
    except OSError:
        pass
    vbios = read(gpu.path, "vbios_version").text
    if vbios:
        versions["vbios"] = vbios
    return versions


def driver_version(root: Path, vendor: str) -> Read:
    """The kernel driver's version: NVIDIA's /proc/driver/nvidia/version or its module version;
    amdgpu's module version (DKMS builds), else the kernel release (in-tree amdgpu)."""
    if vendor == "nvidia":
        found = read(root, "proc/driver/nvidia/version")
        match = re.search(r"Kernel Module(?: for \S+)?\s+([0-9.]+)", found.text or "")
        if match:
            return Read(match.group(1), found.source)
        return read(root, "sys/module/nvidia/version")
    module = read(root, "sys/module/amdgpu/version")
    if module.text:
        return module
    release = read(root, "proc/sys/kernel/osrelease")
    return Read(f"in-tree with kernel {release.text}", release.source) if release.text else module


def memlock_limit(root: Path) -> Read:
    """'Max locked memory' (soft limit) of this process from /proc/self/limits: bytes or 'unlimited'."""
    found = read(root, "proc/self/limits")
    if found.text is None:
        return found
    match = re.search(r"^Max locked memory\s+(\S+)", found.text, re.M)
    if not match:
        return Read(None, found.source, f"{found.source} has no 'Max locked memory' line")
    return Read(match.group(1), found.source)


def selected_mode(text: str | None) -> str | None:
    """'always [madvise] never' -> 'madvise' (the kernel marks the mode in force with brackets)."""
    match = re.search(r"\[(\w+)\]", text or "")
    return match.group(1) if match else None


def cpu_vendor(root: Path) -> str | None:
    """'AuthenticAMD', 'GenuineIntel', ... from /proc/cpuinfo."""
    match = re.search(r"^vendor_id\s*:\s*(\S+)", read(root, "proc/cpuinfo").text or "", re.M)
    return match.group(1) if match else None


def read_kernel_messages(root: Path) -> Read:
    """The kernel's message buffer from /dev/kmsg, read without blocking ('dmesg' needs the same
    permission: root, or kernel.dmesg_restrict=0). Each record's text, one a line."""
    relative = "dev/kmsg"
    source = shown(root, relative)
    try:
        fd = os.open(root / relative, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return Read(None, source, f"cannot read {source}: {exc.strerror or exc}")
    chunks: list[bytes] = []
    try:
        while sum(len(c) for c in chunks) < KMSG_LIMIT_BYTES:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break  # the end of the buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record was overwritten while reading: go on
                    continue
                return Read(None, source, f"cannot read {source}: {exc.strerror or exc}")
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    # a record is 'priority,sequence,timestamp,flags;text'; continuation lines start with a space
    return Read("\n".join(line.split(";", 1)[-1] for line in lines if line and not line.startswith(" ")), source)
