"""`DeviceInfo`: everything a validation run states about one device, a frozen record that
travels as JSON (reports, pinned workers, saved descriptions replayed with a hook).

Its own module so the platform rules that read a device (peaks, partitions) need not import
discovery; `rocm_validate.platform.devices` discovers devices into it and is where users import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["DeviceInfo"]


@dataclass(frozen=True)
class DeviceInfo:
    """Everything a validation run states about one device. JSON keys are these field names."""

    backend: str  # "rocm", "cuda" or "cpu"
    index: int | None  # torch device index; None for the CPU
    name: str
    arch: str  # "gfx942", "sm_90", or the CPU model
    device_key: str
    key_aliases: tuple[str, ...] = ()  # keys earlier releases or other tools gave this device: still read
    arch_features: tuple[tuple[str, bool], ...] = ()  # sramecc / xnack, or CPU vector ISA
    compute_units: int | None = None
    memory_bytes: int | None = None
    l2_cache_bytes: int | None = None
    last_level_cache_bytes: int | None = None  # Infinity Cache (MALL) on MI300, L3 on CPUs
    max_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    driver_version: str | None = None
    runtime_version: str | None = None  # HIP or CUDA version torch was built with
    torch_version: str | None = None
    collective_library: str | None = None  # "rccl" / "nccl"
    collective_version: str | None = None
    libraries: tuple[tuple[str, str], ...] = ()  # hipblaslt, cublas, cudnn, ... where exposed
    compute_partition: str | None = None  # MI300: SPX, DPX, QPX, CPX
    memory_partition: str | None = None  # MI300: NPS1, NPS4
    partition_source: str | None = None  # the tool, "sysfs", or "inferred from 38 of 304 CUs (...)"
    visibility: tuple[tuple[str, str], ...] = ()
    fp8_formats: tuple[str, ...] = ()
    scaled_mm: bool = False
    attention_backends: tuple[str, ...] = ("math",)
    attention_library: str | None = None  # ROCm flash attention: "aotriton" or "ck"
    preferred_blas: str | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    sources: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def is_gpu(self) -> bool:
        return self.backend != "cpu"

    @property
    def torch_device(self) -> str:
        """The torch device string: 'cuda:0' (ROCm GPUs are 'cuda' devices in PyTorch) or 'cpu'."""
        return "cpu" if self.backend == "cpu" else f"cuda:{self.index}"

    @property
    def flash_attention(self) -> bool:
        return "flash" in self.attention_backends

    @property
    def mem_efficient_attention(self) -> bool:
        return "mem_efficient" in self.attention_backends

    @property
    def memory_gib(self) -> float | None:
        return None if self.memory_bytes is None else self.memory_bytes / 1024**3

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: pairs become objects, tuples lists, plus the derived attention flags."""
        data = asdict(self)
        for name in ("arch_features", "libraries", "visibility"):
            data[name] = dict(getattr(self, name))
        for name in ("key_aliases", "fp8_formats", "attention_backends", "sources", "errors"):
            data[name] = list(getattr(self, name))
        data["flash_attention"] = self.flash_attention
        data["mem_efficient_attention"] = self.mem_efficient_attention
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceInfo:
        """Inverse of to_dict (derived keys ignored), for reports and worker hand-over."""
        values: dict[str, Any] = {}
        for spec in fields(cls):
            if spec.name not in data:
                continue
            value = data[spec.name]
            if isinstance(value, Mapping):
                value = tuple((str(k), v) for k, v in value.items())
            elif isinstance(value, list):
                value = tuple(value)
            values[spec.name] = value
        return cls(**values)
