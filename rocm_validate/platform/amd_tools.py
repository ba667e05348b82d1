"""Parsers for what AMD's tools say about GPUs: amd-smi, rocm-smi, rocminfo and the amdsmi package.

Each parser is a pure function from a tool's output (text or the package's dicts) to
`AmdGpuFacts`, so it is tested with recorded outputs of devices we cannot run on. The formats
moved between ROCm releases; each parser names the shapes it accepts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform.arch import normalize_gfx, parse_gcn_arch

_UNIT_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_QUANTITY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)")
_NOT_AVAILABLE = {"", "N/A", "NA", "UNKNOWN", "NONE"}


@dataclass(frozen=True)
class AmdGpuFacts:
    """What one AMD tool reported about one GPU (or one partition of a GPU)."""

    source: str
    index: int | None = None
    bdf: str | None = None
    market_name: str | None = None
    arch: str | None = None
    arch_features: tuple[tuple[str, bool], ...] = ()
    compute_units: int | None = None
    memory_bytes: int | None = None
    l2_cache_bytes: int | None = None
    last_level_cache_bytes: int | None = None
    max_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    driver_version: str | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    partition_id: int | None = None
    uuid: str | None = None



def _present(value: Any) -> bool:
    return value is not None and str(value).strip().upper() not in _NOT_AVAILABLE


def _text(value: Any) -> str | None:
    return str(value).strip() if _present(value) else None


def _int(value: Any) -> int | None:
    if not _present(value):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(float(text.split()[0]))
    except ValueError:
        return None


def quantity_bytes(value: Any, default_unit: str = "B") -> int | None:
    """{'value': 65520, 'unit': 'MB'}, '65520 MB', 65520 (with default_unit) -> bytes."""
    if isinstance(value, Mapping):
        number, unit = value.get("value"), str(value.get("unit") or default_unit)
    else:
        number, unit = value, default_unit
    if not _present(number):
        return None
    if isinstance(number, str):
        match = _QUANTITY_RE.match(number)
        if not match:
            return None
        number, unit = match.group(1), match.group(2) or unit
    scale = _UNIT_BYTES.get(unit.upper().replace("IB", "B"))
    return None if scale is None else int(float(number) * scale)


def _mhz(value: Any) -> int | None:
    """'1700 MHz', '2100', 2100 -> 2100."""
    if isinstance(value, Mapping):
        value = value.get("value")
    if isinstance(value, str):
        match = _QUANTITY_RE.match(value)
        return int(float(match.group(1))) if match else None
    return _int(value)


def normalize_bdf(bdf: str | None) -> str | None:
    """'0000:0C:00.0' / '0c:00.0' -> '0000:0c:00.0'."""
    if not _present(bdf):
        return None
    text = str(bdf).strip().lower()
    if re.fullmatch(r"[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", text):
        text = "0000:" + text
    return text if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", text) else None


def bdf_from_bdfid(bdfid: int, domain: int = 0) -> str:
    """rocminfo's decimal BDFID (bus << 8 | device << 3 | function) -> '0000:26:00.0'."""
    return f"{domain:04x}:{(bdfid >> 8) & 0xFF:02x}:{(bdfid >> 3) & 0x1F:02x}.{bdfid & 0x7}"


def _cache_sizes(entries: Iterable[Mapping[str, Any]], size_unit: str) -> tuple[int | None, int | None]:
    """(L2 bytes, last-level bytes) from amd-smi / amdsmi cache lists; last level is L3 (MALL) if any."""
    by_level: dict[int, int] = {}
    for entry in entries:
        properties = [str(p).upper() for p in entry.get("cache_properties", []) or []]
        if properties and "DATA_CACHE" not in properties:
            continue
        level = _int(entry.get("cache_level"))
        size = quantity_bytes(entry.get("cache_size"), size_unit)
        if level is not None and size:
            by_level[level] = max(by_level.get(level, 0), size)
    l2 = by_level.get(2)
    last = by_level[max(by_level)] if by_level and max(by_level) >= 2 else None
    return l2, last


def driver_version(value: Any) -> str | None:
    """amdgpu driver version; amd-smi falls back to /proc/version for the in-box (kernel) driver,
    printed with its spaces removed ('Linuxversion6.14.0-24-generic(buildd@...'): name it so."""
    text = _text(value)
    if text and text.lower().startswith("linuxversion"):
        kernel = re.match(r"linuxversion([^\s(]+)", text, re.IGNORECASE)
        return f"inbox (kernel {kernel.group(1)})" if kernel else "inbox"
    return text


def _max_level_mhz(levels: Any) -> int | None:
    if not isinstance(levels, Mapping):
        return None
    values = [mhz for mhz in (_mhz(v) for v in levels.values()) if mhz]
    return max(values) if values else None


def _partition(entry: Mapping[str, Any]) -> tuple[str | None, str | None, int | None]:
    part = entry.get("partition")
    if not isinstance(part, Mapping):
        return None, None, None
    compute = part.get("compute_partition", part.get("accelerator_partition"))
    return _text(compute), _text(part.get("memory_partition")), _int(part.get("partition_id"))


def parse_amd_smi_static_json(text: str) -> list[AmdGpuFacts]:
    """`amd-smi static --json`: ROCm 7 `{"gpu_data": [...]}` or ROCm 6 `[{"gpu": 0, ...}, ...]`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolOutputError(f"amd-smi static --json printed invalid JSON: {exc}") from None
    entries = data.get("gpu_data") if isinstance(data, Mapping) else data
    if not isinstance(entries, list):
        raise ToolOutputError("amd-smi static --json: expected a list of GPUs or {'gpu_data': [...]}")
    facts = []
    for entry in entries:
        if not isinstance(entry, Mapping) or "asic" not in entry:
            continue
        asic = entry.get("asic") or {}
        bus = entry.get("bus") or {}
        vram = entry.get("vram") or {}
        clock = entry.get("clock") or {}
        l2, last = _cache_sizes(entry.get("cache_info") or [], "KB")
        compute, memory, partition_id = _partition(entry)
        arch = _text(asic.get("target_graphics_version"))
        facts.append(
            AmdGpuFacts(
                source="amd-smi static --json",
                index=_int(entry.get("gpu")),
                bdf=normalize_bdf(bus.get("bdf")),
                market_name=_text(asic.get("market_name")),
                arch=normalize_gfx(arch) if arch else None,
                compute_units=_int(asic.get("num_compute_units")),
                memory_bytes=quantity_bytes(vram.get("size"), "MB"),
                l2_cache_bytes=l2,
                last_level_cache_bytes=last,
                max_clock_mhz=_max_level_mhz((clock.get("sys") or {}).get("frequency_levels")),
                max_memory_clock_mhz=_max_level_mhz((clock.get("mem") or {}).get("frequency_levels")),
                driver_version=driver_version((entry.get("driver") or {}).get("version")),
                compute_partition=compute,
                memory_partition=memory,
                partition_id=partition_id,
            )
        )
    return facts


def parse_rocm_smi_json(text: str) -> list[AmdGpuFacts]:
    """`rocm-smi --showproductname [--showdriverversion ...] --json`: {"card0": {...}, "system": {...}}."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolOutputError(f"rocm-smi --json printed invalid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ToolOutputError("rocm-smi --json: expected an object keyed by card0, card1, ...")
    driver = _text((data.get("system") or {}).get("Driver version"))
    facts = []
    for key, card in data.items():
        match = re.fullmatch(r"card(\d+)", key)
        if not match or not isinstance(card, Mapping):
            continue
        name = card.get("Device Name") or card.get("Card Series") or card.get("Card series")
        gfx = _text(card.get("GFX Version"))
        compute = card.get("Compute Partition") or card.get("current_compute_partition")
        memory = card.get("Memory Partition") or card.get("current_memory_partition")
        facts.append(
            AmdGpuFacts(
                source="rocm-smi --json",
                index=int(match.group(1)),
                bdf=normalize_bdf(card.get("PCI Bus")),
                market_name=_text(name),
                arch=normalize_gfx(gfx) if gfx else None,
                memory_bytes=_int(card.get("VRAM Total Memory (B)")),
                driver_version=driver or _text(card.get("Driver version")),
                compute_partition=_text(compute),
                memory_partition=_text(memory),
            )
        )
    return sorted(facts, key=lambda f: f.index if f.index is not None else -1)


_AGENT_SPLIT = re.compile(r"^\*+\s*\nAgent \d+\s*\n\*+\s*$", re.MULTILINE)


def _rocminfo_field(block: str, label: str) -> str | None:
    match = re.search(rf"^\s*{re.escape(label)}:\s*(.*?)\s*$", block, re.MULTILINE)
    return match.group(1) if match else None


def _rocminfo_cache_kb(block: str, level: str) -> int | None:
    match = re.search(rf"^\s*{level}:\s*(\d+)\(0x[0-9a-fA-F]+\)\s*KB", block, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def parse_rocminfo(text: str) -> list[AmdGpuFacts]:
    """`rocminfo`: one fact per agent whose Device Type is GPU, in agent order."""
    if "HSA Agents" not in text:
        raise ToolOutputError("rocminfo output has no 'HSA Agents' section")
    facts = []
    for block in _AGENT_SPLIT.split(text)[1:]:
        if (_rocminfo_field(block, "Device Type") or "").upper() != "GPU":
            continue
        isa = re.search(r"amdgcn-amd-amdhsa--(\S+)", block)
        gcn = parse_gcn_arch(isa.group(1) if isa else (_rocminfo_field(block, "Name") or ""))
        bdfid = _int(_rocminfo_field(block, "BDFID"))
        l3 = _rocminfo_cache_kb(block, "L3")
        l2 = _rocminfo_cache_kb(block, "L2")
        uuid = _text(_rocminfo_field(block, "Uuid"))
        facts.append(
            AmdGpuFacts(
                source="rocminfo",
                index=len(facts),
                bdf=bdf_from_bdfid(bdfid) if bdfid is not None else None,
                market_name=_text(_rocminfo_field(block, "Marketing Name")),
                arch=gcn.name or None,
                arch_features=gcn.features,
                compute_units=_int(_rocminfo_field(block, "Compute Unit")),
                l2_cache_bytes=l2,
                last_level_cache_bytes=l3 or l2,
                max_clock_mhz=_int(_rocminfo_field(block, "Max Clock Freq. (MHz)")),
                uuid=uuid,
            )
        )
    return facts


def facts_from_amdsmi(
    index: int,
    asic: Mapping[str, Any],
    bdf: str | None = None,
    driver: Mapping[str, Any] | None = None,
    vram: Mapping[str, Any] | None = None,
    cache: Mapping[str, Any] | None = None,
    clock: Mapping[str, Any] | None = None,
    compute_partition: str | None = None,
    memory_partition: str | None = None,
) -> AmdGpuFacts:
    """The dicts the amdsmi package returns for one processor handle -> AmdGpuFacts.

    asic: amdsmi_get_gpu_asic_info; driver: amdsmi_get_gpu_driver_info; vram:
    amdsmi_get_gpu_vram_info (vram_size in MB); cache: amdsmi_get_gpu_cache_info (sizes in KB);
    clock: amdsmi_get_clock_info for the GFX clock (MHz).
    """
    arch = _text(asic.get("target_graphics_version"))
    l2, last = _cache_sizes((cache or {}).get("cache", []) or [], "KB")
    return AmdGpuFacts(
        source="amdsmi",
        index=index,
        bdf=normalize_bdf(bdf),
        market_name=_text(asic.get("market_name")),
        arch=normalize_gfx(arch) if arch else None,
        compute_units=_int(asic.get("num_compute_units", asic.get("num_of_compute_units"))),
        memory_bytes=quantity_bytes((vram or {}).get("vram_size"), "MB"),
        l2_cache_bytes=l2,
        last_level_cache_bytes=last,
        max_clock_mhz=_int((clock or {}).get("max_clk")),
        driver_version=driver_version((driver or {}).get("driver_version")),
        compute_partition=_text(compute_partition),
        memory_partition=_text(memory_partition),
    )


def merge_facts(primary: AmdGpuFacts, extra: AmdGpuFacts) -> AmdGpuFacts:
    """Fill the gaps of `primary` with what `extra` knows; `primary` wins where both know."""
    updates = {
        name: getattr(extra, name)
        for name in primary.__dataclass_fields__
        if name != "source" and getattr(primary, name) in (None, ()) and getattr(extra, name) not in (None, ())
    }
    if not updates:
        return primary
    return replace(primary, source=f"{primary.source}+{extra.source}", **updates)


def match_facts(bdfs: list[str | None], facts: list[AmdGpuFacts]) -> list[AmdGpuFacts | None]:
    """Pair each torch-visible GPU (by PCI address) with the tool's facts.

    A PCI address shared by several partitions (CPX) is matched in order; devices with no
    address fall back to the tool's order only when the counts agree (no visibility mask).
    """
    remaining = list(facts)
    matched: list[AmdGpuFacts | None] = []
    for bdf in bdfs:
        key = normalize_bdf(bdf)
        hit = next((f for f in remaining if key and f.bdf and _same_device(f.bdf, key)), None)
        if hit is not None:
            remaining.remove(hit)
        matched.append(hit)
    if all(m is None for m in matched) and len(bdfs) == len(facts):
        return list(facts)
    return matched


def _same_device(tool_bdf: str, torch_bdf: str) -> bool:
    """torch reports domain:bus:device without the function; partitions differ only in function."""
    return tool_bdf.rsplit(".", 1)[0] == torch_bdf.rsplit(".", 1)[0]
