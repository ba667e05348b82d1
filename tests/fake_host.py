"""A fake host tree for the preflight suite: /proc, /sys and /dev/kmsg as the kernel shows them on
an AMD Instinct node (healthy by default), written under a temporary folder that the readers and
`--rocm-host-root` take as the root."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MI300X_CLASS = "0x120000"  # processing accelerator
H100_CLASS = "0x030200"  # 3D controller


@dataclass
class FakeGpu:
    address: str = "0000:0c:00.0"
    vendor: str = "0x1002"
    pci_class: str = MI300X_CLASS
    link: tuple[str, str, str, str] = (
        "32.0 GT/s PCIe",
        "16",
        "32.0 GT/s PCIe",
        "16",
    )  # current speed, width, max speed, width
    ras: dict[str, str] | None = field(default_factory=lambda: {"umc": "ue: 0\nce: 0\n", "gfx": "ue: 0\nce: 0\n"})
    firmware: dict[str, str] = field(default_factory=lambda: {"mec": "0x0000009d", "sos": "0x00270082"})


@dataclass
class FakeHost:
    gpus: list[FakeGpu] = field(default_factory=lambda: [FakeGpu(), FakeGpu("0000:1f:00.0")])
    numa_balancing: str = "0"
    cmdline: str = "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 ro pci=realloc=off amd_iommu=on iommu=pt"
    cpu_vendor: str = "AuthenticAMD"
    transparent_hugepage: str = "[always] madvise never"
    memlock: str = "unlimited"
    kmsg: str = "6,1,100,-;amdgpu 0000:0c:00.0: amdgpu: SMU is initialized successfully!\n"
    amdgpu_version: str | None = "6.8.5"
    sysfs: bool = True

    def write(self, root: Path) -> Path:
        files = {
            "proc/sys/kernel/numa_balancing": self.numa_balancing,
            "proc/cmdline": self.cmdline,
            "proc/cpuinfo": f"processor\t: 0\nvendor_id\t: {self.cpu_vendor}\n",
            "proc/meminfo": "MemTotal:       2113464960 kB\nHugePages_Total:       0\n",
            "proc/self/limits": f"Limit                     Soft Limit           Hard Limit           Units\n"
            f"Max locked memory         {self.memlock}            {self.memlock}            bytes\n",
            "proc/sys/kernel/osrelease": "6.8.0-45-generic",
            "dev/kmsg": self.kmsg,
        }
        if self.sysfs:
            files["sys/kernel/mm/transparent_hugepage/enabled"] = self.transparent_hugepage
            if self.amdgpu_version:
                files["sys/module/amdgpu/version"] = self.amdgpu_version
            for gpu in self.gpus:
                base = f"sys/bus/pci/devices/{gpu.address}"
                files[f"{base}/vendor"] = gpu.vendor
                files[f"{base}/class"] = gpu.pci_class
                for name, value in zip(
                    ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"), gpu.link
                ):
                    files[f"{base}/{name}"] = value
                for block, text in (gpu.ras or {}).items():
                    files[f"{base}/ras/{block}_err_count"] = text
                for name, version in gpu.firmware.items():
                    files[f"{base}/fw_version/{name}_fw_version"] = version
            files["sys/bus/pci/devices/0000:00:01.0/vendor"] = "0x1022"  # a host bridge: not a GPU
            files["sys/bus/pci/devices/0000:00:01.0/class"] = "0x060000"
        for relative, text in files.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + ("" if text.endswith("\n") else "\n"))
        return root
