"""Parser for what `nvidia-smi -q -x` says about a node's GPUs (offline discovery's NVIDIA source).

A pure function from the XML to `NvidiaSmiLog`, tested with output in the tool's format. The
XML names the architecture ("Hopper") but not the compute capability; the capability is taken
from the architecture where it has one, and from the product name where it has several
(Ampere: A100 / A30 are sm_80, the others sm_86).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform.amd_tools import normalize_bdf, quantity_bytes

_CAPABILITY_BY_ARCHITECTURE: dict[str, tuple[int, int]] = {
    "volta": (7, 0),
    "turing": (7, 5),
    "ada lovelace": (8, 9),
    "hopper": (9, 0),
}
# Architectures whose products differ in capability: (name pattern, capability), first match wins.
_CAPABILITY_BY_NAME: dict[str, tuple[tuple[str, tuple[int, int]], ...]] = {
    "ampere": ((r"\b(a100|a30|a800)\b", (8, 0)), (r".", (8, 6))),
    "blackwell": ((r"\bg?b(100|200)\b", (10, 0)), (r"\bg?b300\b", (10, 3))),
}


@dataclass(frozen=True)
class NvidiaGpuFacts:
    """One GPU of `nvidia-smi -q -x`."""

    index: int
    name: str
    architecture: str | None
    capability: tuple[int, int] | None
    memory_bytes: int | None
    pci_bus_id: str | None
    uuid: str | None
    max_clock_mhz: int | None
    max_memory_clock_mhz: int | None


@dataclass(frozen=True)
class NvidiaSmiLog:
    """The node: driver and CUDA versions, and its GPUs."""

    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[NvidiaGpuFacts, ...]


def compute_capability(architecture: str | None, name: str) -> tuple[int, int] | None:
    """('Hopper', 'NVIDIA H100 80GB HBM3') -> (9, 0); None where neither says."""
    key = (architecture or "").strip().lower()
    if key in _CAPABILITY_BY_ARCHITECTURE:
        return _CAPABILITY_BY_ARCHITECTURE[key]
    for pattern, capability in _CAPABILITY_BY_NAME.get(key, ()):
        if re.search(pattern, name.lower()):
            return capability
    return None


def _text(element: ElementTree.Element, path: str) -> str | None:
    found = element.findtext(path)
    text = (found or "").strip()
    return None if text.upper() in ("", "N/A", "NOT FOUND") else text


def _mhz(element: ElementTree.Element, path: str) -> int | None:
    match = re.match(r"(\d+)", _text(element, path) or "")
    return int(match.group(1)) if match else None


def parse_nvidia_smi_xml(text: str) -> NvidiaSmiLog:
    """`nvidia-smi -q -x`: <nvidia_smi_log> with one <gpu id="00000000:18:00.0"> per GPU."""
    try:
        root = ElementTree.fromstring(text.strip())
    except ElementTree.ParseError as exc:
        raise ToolOutputError(f"nvidia-smi -q -x printed invalid XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ToolOutputError(f"nvidia-smi -q -x: expected <nvidia_smi_log>, found <{root.tag}>")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        name = _text(gpu, "product_name") or "NVIDIA GPU"
        architecture = _text(gpu, "product_architecture")
        uuid = _text(gpu, "uuid")
        gpus.append(
            NvidiaGpuFacts(
                index=index,
                name=name,
                architecture=architecture,
                capability=compute_capability(architecture, name),
                memory_bytes=quantity_bytes(_text(gpu, "fb_memory_usage/total")),
                pci_bus_id=normalize_bdf((_text(gpu, "pci/pci_bus_id") or gpu.get("id") or "")[-12:]),
                uuid=uuid,
                max_clock_mhz=_mhz(gpu, "max_clocks/sm_clock"),
                max_memory_clock_mhz=_mhz(gpu, "max_clocks/mem_clock"),
            )
        )
    return NvidiaSmiLog(_text(root, "driver_version"), _text(root, "cuda_version"), tuple(gpus))
