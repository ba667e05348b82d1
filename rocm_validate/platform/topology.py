"""Links between GPUs as `amd-smi topology` prints them: link type, hops, weight, P2P access and
the NUMA bandwidth range of every pair, in text or `--json`, ROCm 6.0 through 7.x; and the same
matrices as `rocm-smi --showtopo` prints them.

What the collectives suite and its P2P check are owed by a node: which pairs copy peer to peer
(`p2p_pairs`, named as the suite names its metrics, 'gpu0-gpu3'), over what link, and which pairs
break the node's own pattern (one PCIe pair among XGMI pairs is a link down, `link_problems`).

Layouts accepted:
- text: titled tables whose header and first column are the GPUs' PCI addresses (ACCESS,
  WEIGHT, HOPS, LINK TYPE, NUMA BW TABLE ...; ROCm 6.0+), cells 'XGMI', '1', '50000-50000', 'N/A';
- JSON: `[{"gpu", "bdf", "links": [{"gpu", "bdf", "weight", "link_status", "link_type",
  "num_hops", "bandwidth"}]}]` (ROCm 6.1+), or the earlier `[{"gpu", "link_accessibility":
  {"gpu_1": ...}, "weight", "hops", "link_type", "numa_bandwidth"}]`; either may sit under a key
  of an object (ROCm 7 wraps lists so).
Unknown tables and keys are ignored.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocm_validate.platform.amd_smi_views import json_documents
from rocm_validate.platform.amd_tools import AmdGpuFacts, clean_text, found_nothing, looks_like_json, normalize_bdf

TOPOLOGY = "amd-smi topology"
_BDF = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_GPU_NAME = re.compile(r"^(?:gpu_?)?(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class GpuLink:
    """The link from one GPU to another, as far as the view printed it."""

    source: int
    target: int
    source_bdf: str | None = None
    target_bdf: str | None = None
    link_type: str | None = None  # "XGMI", "PCIE", ...
    hops: int | None = None
    weight: int | None = None
    accessible: bool | None = None  # P2P access (link status ENABLED / DISABLED)
    min_bandwidth_mbps: int | None = None
    max_bandwidth_mbps: int | None = None

    @property
    def pair(self) -> tuple[int, int]:
        return (min(self.source, self.target), max(self.source, self.target))


def _value(cell: Any) -> str | None:
    text = str(cell).strip() if cell is not None else ""
    return None if text.upper() in ("", "N/A", "NA", "SELF") else text


def _int(cell: Any) -> int | None:
    text = _value(cell)
    return int(float(text)) if text and re.fullmatch(r"\d+(?:\.\d+)?", text) else None


def _bandwidth(cell: Any) -> tuple[int | None, int | None]:
    """'50000-100000' (MB/s, min-max) -> (50000, 100000)."""
    found = re.fullmatch(r"(\d+)\s*-\s*(\d+)", _value(cell) or "")
    return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def _status(cell: Any) -> bool | None:
    text = (_value(cell) or "").upper()
    return True if text in ("ENABLED", "T", "TRUE") else False if text in ("DISABLED", "F", "FALSE") else None


# Which field each table (text title or JSON key) fills.
_FIELDS = {
    "ACCESS": "accessible",
    "LINK_ACCESSIBILITY": "accessible",
    "LINK_STATUS": "accessible",
    "WEIGHT": "weight",
    "HOPS": "hops",
    "NUM_HOPS": "hops",
    "LINK_TYPE": "link_type",
    "NUMA_BW": "bandwidth",
    "NUMA_BANDWIDTH": "bandwidth",
    "BANDWIDTH": "bandwidth",
}


def _with(link: GpuLink, field: str, cell: Any) -> GpuLink:
    if field == "accessible":
        return replace(link, accessible=_status(cell))
    if field == "weight":
        return replace(link, weight=_int(cell))
    if field == "hops":
        return replace(link, hops=_int(cell))
    if field == "link_type":
        return replace(link, link_type=(_value(cell) or "").upper() or None)
    low, high = _bandwidth(cell)
    return replace(link, min_bandwidth_mbps=low, max_bandwidth_mbps=high)


class _Links:
    """Links being read, keyed by (source, target) GPU index; addresses map to indices in the
    order the view lists them."""

    def __init__(self) -> None:
        self.links: dict[tuple[int, int], GpuLink] = {}
        self.bdfs: dict[str, int] = {}

    def index(self, name: str, position: int) -> int:
        bdf = normalize_bdf(name)
        if bdf is not None:
            return self.bdfs.setdefault(bdf, len(self.bdfs))
        found = _GPU_NAME.match(name.strip())
        return int(found.group(1)) if found else position

    def set(self, source: int, target: int, field: str, cell: Any, bdfs: tuple[str | None, str | None]) -> None:
        if source == target:
            return
        link = self.links.get((source, target)) or GpuLink(source, target, *bdfs)
        self.links[(source, target)] = _with(link, field, cell)

    def result(self) -> list[GpuLink]:
        return [self.links[key] for key in sorted(self.links)]


# rocm-smi --showtopo's banners: '=== Weight between two GPUs ===', 'Link Type between two GPUs' ...
_ROCM_SMI_TITLE = re.compile(r"^\s*=+\s*(.*?)\s*=+\s*$")
_ROCM_SMI_TABLES = {
    "weight": "WEIGHT",
    "hops": "HOPS",
    "link type": "LINK_TYPE",
    "access": "ACCESS",
    "link access": "ACCESS",
}


def _rocm_smi_table(title: str) -> str | None:
    """The table a rocm-smi banner opens ('Hops between two GPUs' -> HOPS), or None for any other
    banner (which ends the table before it)."""
    words = title.lower()
    if "between two gpus" not in words:
        return None
    return next((table for key, table in _ROCM_SMI_TABLES.items() if words.startswith(key)), None)


def _read_text(text: str, found: _Links) -> None:
    title: str | None = None
    columns: list[str] = []
    for line in clean_text(text).expandtabs(8).splitlines():
        heading = re.match(r"^\s*([A-Z][A-Z0-9 _-]*?)\s*TABLE\s*:\s*$", line)
        if heading:
            title, columns = heading.group(1).strip().replace(" ", "_").replace("-", "_"), []
            continue
        banner = _ROCM_SMI_TITLE.match(line)
        if banner:
            title, columns = _rocm_smi_table(banner.group(1)), []
            continue
        cells = line.split()
        if title is None or not cells:
            continue
        if not columns and all(_BDF.match(c) or _GPU_NAME.match(c) for c in cells):
            columns = cells
            continue
        field = _FIELDS.get(title)
        if field is None or not columns or not (_BDF.match(cells[0]) or _GPU_NAME.match(cells[0])):
            continue
        source = found.index(cells[0], len(found.bdfs))
        for position, (name, cell) in enumerate(zip(columns, cells[1:])):
            target = found.index(name, position)
            found.set(source, target, field, cell, (normalize_bdf(cells[0]), normalize_bdf(name)))


def _entries(document: Any) -> list[Mapping[str, Any]]:
    """The per-GPU entries of a JSON document: a list, or the list under some key of an object."""
    if isinstance(document, Mapping):
        listed = [v for v in document.values() if isinstance(v, list)]
        return [e for lst in listed for e in lst if isinstance(e, Mapping)]
    return [e for e in document if isinstance(e, Mapping)] if isinstance(document, list) else []


# rocm-smi --showtopo --json: {"system": {"(Topology) Hops between DRM devices 0 and 1": "1", ...}}
_ROCM_SMI_KEY = re.compile(r"\(Topology\)\s*(.+?)\s+between DRM devices (\d+) and (\d+)", re.IGNORECASE)


def _read_rocm_smi_json(document: Any, found: _Links) -> None:
    system = document.get("system") if isinstance(document, Mapping) else None
    for key, cell in (system or {}).items() if isinstance(system, Mapping) else ():
        match = _ROCM_SMI_KEY.fullmatch(str(key).strip())
        table = _rocm_smi_table(f"{match.group(1)} between two GPUs") if match else None
        if match and table:
            found.set(int(match.group(2)), int(match.group(3)), _FIELDS[table], cell, (None, None))


def _read_json(text: str, found: _Links) -> None:
    for document in json_documents(text):
        _read_rocm_smi_json(document, found)
        for position, entry in enumerate(_entries(document)):
            bdf = normalize_bdf(entry.get("bdf"))
            source = _int(entry.get("gpu"))
            source = source if source is not None else position
            if bdf:
                found.bdfs.setdefault(bdf, source)
            for link in entry.get("links") or []:  # ROCm 6.1+: one object per destination
                if not isinstance(link, Mapping):
                    continue
                target = _int(link.get("gpu"))
                if target is None:
                    continue
                for key, cell in link.items():
                    field = _FIELDS.get(str(key).upper())
                    if field is not None:
                        found.set(source, target, field, cell, (bdf, normalize_bdf(link.get("bdf"))))
            for key, table in entry.items():  # ROCm 6.0: one table per fact, keyed gpu_N
                field = _FIELDS.get(str(key).upper())
                if field is None or not isinstance(table, Mapping):
                    continue
                for name, cell in table.items():
                    target = found.index(str(name), -1)
                    if target >= 0:
                        found.set(source, target, field, cell, (bdf, None))


def parse_amd_smi_topology(text: str) -> list[GpuLink]:
    """`amd-smi topology [-a -w -o -t -b ...] [--json]`: one link per ordered pair of GPUs."""
    found = _Links()
    if looks_like_json(text):
        _read_json(text, found)
    else:
        _read_text(text, found)
    links = found.result()
    if not links:
        raise found_nothing(TOPOLOGY, text, f"{TOPOLOGY}: no table or entry links two GPUs")
    return links


def parse_amd_smi_topology_gpus(text: str, tool: str = TOPOLOGY) -> list[AmdGpuFacts]:
    """The GPUs the topology view lists (index and PCI address), so a folder holding only this
    view still counts them."""
    links = parse_amd_smi_topology(text)
    addresses: dict[int, str | None] = {}
    for gpu, bdf in [(link.source, link.source_bdf) for link in links] + [
        (link.target, link.target_bdf) for link in links
    ]:
        addresses[gpu] = addresses.get(gpu) or bdf  # a table cut after its first rows still names every column
    return [AmdGpuFacts(source=tool, index=gpu, bdf=addresses.get(gpu)) for gpu in sorted(addresses)]


def p2p_pairs(links: list[GpuLink]) -> list[tuple[int, int]]:
    """The GPU pairs peer-to-peer copies can run between (access not refused), each once."""
    refused = {link.pair for link in links if link.accessible is False}
    return sorted({link.pair for link in links} - refused)


def pair_name(pair: tuple[int, int]) -> str:
    """'gpu0-gpu3': a pair as the collectives suite names its P2P metrics (p2p.gpu0-gpu3.256mib)."""
    return f"gpu{pair[0]}-gpu{pair[1]}"


def describe_links(links: list[GpuLink]) -> str:
    """'8 GPUs, 28 pairs: 28 XGMI 1 hop, 50-50 GB/s': what the view says of the node's links."""
    pairs: dict[tuple[int, int], GpuLink] = {}
    for link in links:
        pairs.setdefault(link.pair, link)
    gpus = {gpu for pair in pairs for gpu in pair}
    kinds = Counter(
        f"{link.link_type or 'unknown link'}"
        + (f" {link.hops} hop{'s' if link.hops != 1 else ''}" if link.hops else "")
        for link in pairs.values()
    )
    bandwidths = {
        (link.min_bandwidth_mbps, link.max_bandwidth_mbps) for link in pairs.values() if link.max_bandwidth_mbps
    }
    said = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
    if bandwidths:
        low = min(b[0] or 0 for b in bandwidths) / 1000
        high = max(b[1] or 0 for b in bandwidths) / 1000
        said += f", {low:g}-{high:g} GB/s"
    refused = [pair_name(link.pair) for link in pairs.values() if link.accessible is False]
    if refused:
        said += f"; no P2P access between {', '.join(refused)}"
    return f"{len(gpus)} GPUs, {len(pairs)} pairs: {said}"


def link_problems(links: list[GpuLink], tool: str = TOPOLOGY) -> list[str]:
    """Pairs that break the node's own pattern: on a node whose pairs are mostly XGMI, a pair over
    PCIe (an XGMI link down, or a GPU outside the hive), and pairs whose P2P access is refused."""
    pairs: dict[tuple[int, int], GpuLink] = {}
    for link in links:
        pairs.setdefault(link.pair, link)
    kinds = Counter(link.link_type for link in pairs.values() if link.link_type)
    problems = []
    if kinds and kinds.most_common(1)[0][0] == "XGMI":
        odd = [link for link in pairs.values() if link.link_type and link.link_type != "XGMI"]
        if odd:
            named = ", ".join(f"{pair_name(link.pair)} ({link.link_type})" for link in odd)
            problems.append(
                f"{tool}: {named} not over XGMI where the other {kinds['XGMI']} pairs are: an XGMI link is down "
                "or a GPU is outside the hive, so P2P and collectives between them run over PCIe; check "
                "`amd-smi xgmi` and `dmesg | grep -i xgmi`"
            )
    refused = [pair_name(link.pair) for link in pairs.values() if link.accessible is False]
    if refused and len(refused) < len(pairs):
        problems.append(
            f"{tool}: no P2P access between {', '.join(refused)} while the other pairs have it: peer-to-peer "
            "copies between them go through host memory"
        )
    return problems


__all__ = [
    "GpuLink",
    "describe_links",
    "link_problems",
    "p2p_pairs",
    "pair_name",
    "parse_amd_smi_topology",
    "parse_amd_smi_topology_gpus",
]
