"""`amd-smi partition` and `amd-smi metric`, in text and `--json`, as ROCm 6.2 through 7.x print them.

On ROCm 7 nodes that no longer ship rocm-smi these views are where the compute and memory
partition modes (SPX ... CPX, NPS1 / NPS4) and the GPU's operating point (clocks, power,
temperature, ECC counts) are printed. Both are read into the same `AmdGpuFacts` the other
readers give (`amd_tools`), so a saved folder holding only one of them still lists its GPUs,
and the metric view's readings into `GpuMetrics`.

Layouts accepted:
- partition, text: the CURRENT_PARTITION / MEMORY_PARTITION / ACCELERATOR_PARTITION_PROFILES
  tables (ROCm 6.3+; PARTITION_ID a list "0,1,...,7" on the first row of a package before 6.4,
  one ID per row after), or ROCm 6.3's 'GPU: N' blocks with MEMORY_PARTITION CAPS / CURRENT;
- partition, JSON: `{"current_partition": [...], "memory_partition": [...], "partition_profiles":
  [...]}` (ROCm 6.4+), or ROCm 6.3's lists, several documents one after the other;
- metric, text: 'GPU: N' blocks ('SOCKET_POWER: 140 W', 'HOTSPOT: 37 °C', GFX_0 ... CLK);
- metric, JSON: a bare list (ROCm 6.x) or `{"gpu_data": [...]}` (ROCm 7), values as
  `{"value", "unit"}` objects (6.1+) or plain numbers (6.0), "N/A" where unread.
Unknown keys and columns are ignored; a missing one leaves its fact unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocm_validate.platform.amd_tools import (
    AmdGpuFacts,
    clean_text,
    found_nothing,
    looks_like_json,
    normalize_bdf,
    quantity_bytes,
    text_blocks,
)

_MODES = re.compile(r"\b([SDTQC]PX)\b", re.IGNORECASE)
_NPS = re.compile(r"\bNPS\d\b", re.IGNORECASE)
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_NOT_AVAILABLE = {"", "N/A", "NA", "NONE", "UNKNOWN"}


def json_documents(text: str) -> list[Any]:
    """Every JSON document in the text, in order: amd-smi prints one per section in some
    releases, and a warning line before them when the user misses a group. A document cut
    short is left out."""
    text = clean_text(text)
    decoder = json.JSONDecoder()
    documents: list[Any] = []
    consumed = 0
    for start in re.finditer(r"^[ \t]*[\[{]", text, re.MULTILINE):
        offset = start.end() - 1
        if offset < consumed:
            continue
        try:
            document, consumed = decoder.raw_decode(text, offset)
        except json.JSONDecodeError:
            continue
        documents.append(document)
    return documents


def _present(value: Any) -> bool:
    return value is not None and str(value).strip().upper() not in _NOT_AVAILABLE


def _number(value: Any) -> float | None:
    """140, '140 W', '37 °C', {'value': 140, 'unit': 'W'} -> 140.0; None for 'N/A'."""
    if isinstance(value, Mapping):
        value = value.get("value")
    if isinstance(value, bool) or not _present(value):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    found = _NUMBER.search(str(value))
    return float(found.group(0)) if found else None


def _whole(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _mode(value: Any, pattern: re.Pattern[str]) -> str | None:
    """'CPX*' -> 'CPX', 'nps4' -> 'NPS4'; None for 'N/A'."""
    found = pattern.search(str(value)) if _present(value) else None
    return found.group(0).upper() if found else None


def _first_id(value: Any) -> int | None:
    """'0', 0, '0,1,2,3,4,5,6,7', [0, 1] -> the first partition ID; None for 'N/A'."""
    if isinstance(value, list):
        value = value[0] if value else None
    found = re.match(r"\s*\[?\s*(\d+)", str(value)) if _present(value) else None
    return int(found.group(1)) if found else None


# --- tables as amd-smi prints them (text) --------------------------------------------------------

_TITLE = re.compile(r"^\s*([A-Z][A-Z0-9_ ]*[A-Z0-9]):\s*$")
_HEADER_CELL = re.compile(r"^[A-Z][A-Z0-9_]*$")


def titled_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """amd-smi's text tables ('TITLE:' then a header of column names then rows) as
    {title: [{column: cell}]}; banners, legends and blank lines are skipped. A row is split at
    runs of two spaces, else at single spaces, else at the header's column positions."""
    tables: dict[str, list[dict[str, str]]] = {}
    title: str | None = None
    header: list[tuple[str, int]] = []
    for line in clean_text(text).expandtabs(8).splitlines():
        heading = _TITLE.match(line)
        if heading:
            title, header = heading.group(1).strip(), []
            tables.setdefault(title, [])
            continue
        if title is None or not line.strip() or line.strip().startswith("*") or line.strip().lower() == "legend:":
            continue
        cells = line.split()
        if not header:
            if cells and all(_HEADER_CELL.match(cell) for cell in cells):
                header = [(m.group(0), m.start()) for m in re.finditer(r"\S+", line)]
            continue
        row = _row(line, header)
        if row is not None:
            tables[title].append(row)
    return tables


def _row(line: str, header: list[tuple[str, int]]) -> dict[str, str] | None:
    names = [name for name, _ in header]
    for cells in (re.split(r"\s{2,}", line.strip()), line.split()):
        if len(cells) == len(names):
            return dict(zip(names, cells))
    if len(line) < header[-1][1]:
        return None  # a line shorter than the table: not one of its rows
    bounds = [start for _, start in header] + [len(line)]
    return {name: line[bounds[i] : bounds[i + 1]].strip() for i, name in enumerate(names)}


# --- amd-smi partition -----------------------------------------------------------------------------

PARTITION = "amd-smi partition"


@dataclass
class _PartitionRow:
    compute: str | None = None
    memory: str | None = None
    partition_id: int | None = None


def _partition_rows(text: str) -> tuple[dict[int, _PartitionRow], list[str]]:
    """{GPU ID: its modes} from every section of the view, and the notes it printed."""
    rows: dict[int, _PartitionRow] = {}
    current: list[Mapping[str, Any]] = []
    memory: list[Mapping[str, Any]] = []
    profiles: list[Mapping[str, Any]] = []
    if looks_like_json(text):
        for document in json_documents(text):
            _sort_json(document, current, memory, profiles)
    else:
        tables = titled_tables(text)
        current += tables.get("CURRENT_PARTITION", [])
        memory += tables.get("MEMORY_PARTITION", [])
        profiles += tables.get("ACCELERATOR_PARTITION_PROFILES", [])
        for kind, number, block in text_blocks(text):  # ROCm 6.3: 'GPU: N' / MEMORY_PARTITION: CAPS, CURRENT
            section = block.get("memory_partition")
            if kind == "GPU" and isinstance(section, Mapping):
                memory.append({"gpu_id": number, "current_memory_partition": section.get("current")})
    for entry in current:
        row = rows.setdefault(_gpu_id(entry), _PartitionRow())
        row.compute = row.compute or _mode(_get(entry, "accelerator_type", "compute_partition"), _MODES)
        row.memory = row.memory or _mode(_get(entry, "memory", "memory_partition"), _NPS)
        row.partition_id = _first_id(_get(entry, "partition_id"))
    for entry in memory:
        row = rows.setdefault(_gpu_id(entry), _PartitionRow())
        row.memory = row.memory or _mode(_get(entry, "current_memory_partition", "current"), _NPS)
    gpu = -1
    for entry in profiles:  # the profile marked '*' is the current one; a row without GPU_ID continues the GPU above
        gpu = _gpu_id(entry) if _present(_get(entry, "gpu_id", "gpu")) else gpu
        if gpu < 0:
            continue
        row = rows.setdefault(gpu, _PartitionRow())
        marked = str(_get(entry, "accelerator_type") or "")
        if marked.endswith("*"):
            row.compute = row.compute or _mode(marked, _MODES)
        if marked.endswith("*") or not _present(marked):
            row.partition_id = (
                row.partition_id if row.partition_id is not None else _first_id(_get(entry, "partition_id"))
            )
    rows.pop(-1, None)
    _inherit_package_modes(rows)
    notes = []
    if re.search(r"requires sudo/root", text, re.IGNORECASE):
        notes.append(
            f"{PARTITION}: the accelerator partition profiles need root and were not read: save "
            "`sudo amd-smi partition` for them"
        )
    return rows, notes


def _inherit_package_modes(rows: dict[int, _PartitionRow]) -> None:
    """amd-smi 7.0 prints the profiles of a package's first partition only and 'N/A' with the
    partition ID for the others (ROCm/amdsmi#132): GPU k + 1 with partition ID p + 1 right after
    GPU k with partition ID p is the same package, in the same modes."""
    ordered = sorted(rows.items())
    for (number, previous), (following, row) in zip(ordered, ordered[1:]):
        ids = previous.partition_id, row.partition_id
        if following == number + 1 and ids[0] is not None and ids[1] == ids[0] + 1:
            row.compute = row.compute or previous.compute
            row.memory = row.memory or previous.memory


def _sort_json(document: Any, current: list[Any], memory: list[Any], profiles: list[Any]) -> None:
    """Sort one JSON document's rows into the view's sections, whichever release wrote it."""
    if isinstance(document, Mapping):
        current += [r for r in document.get("current_partition") or [] if isinstance(r, Mapping)]
        memory += [r for r in document.get("memory_partition") or [] if isinstance(r, Mapping)]
        profiles += [r for r in document.get("partition_profiles") or [] if isinstance(r, Mapping)]
        return
    for entry in document if isinstance(document, list) else []:
        if not isinstance(entry, Mapping):
            continue
        section = entry.get("memory_partition")
        if isinstance(section, Mapping):  # ROCm 6.3: {"gpu": 0, "memory_partition": {"caps", "current"}}
            memory.append({"gpu_id": entry.get("gpu"), "current_memory_partition": section.get("current")})
        elif "profile_index" in {str(k).lower() for k in entry}:
            profiles.append(entry)
        elif "current_memory_partition" in {str(k).lower() for k in entry}:
            memory.append(entry)
        else:
            current.append(entry)


def _get(entry: Mapping[str, Any], *names: str) -> Any:
    lowered = {str(k).strip().lower(): v for k, v in entry.items()}
    return next((lowered[name] for name in names if name in lowered), None)


def _gpu_id(entry: Mapping[str, Any]) -> int:
    value = _whole(_get(entry, "gpu_id", "gpu"))
    return -1 if value is None else value


def parse_amd_smi_partition(text: str) -> list[AmdGpuFacts]:
    """`amd-smi partition [--current] [--memory] [--accelerator] [--json]`: each GPU's compute
    and memory modes and its partition ID. It names no product and no PCI address."""
    rows, notes = _partition_rows(text)
    if not rows:
        said = "".join(f"; {note}" for note in notes)
        raise found_nothing(
            PARTITION, text, f"{PARTITION}: no row names a GPU (no CURRENT_PARTITION or MEMORY_PARTITION table){said}"
        )
    return [
        AmdGpuFacts(
            source=PARTITION,
            index=gpu,
            compute_partition=row.compute,
            memory_partition=row.memory,
            partition_id=row.partition_id,
            partition_source=PARTITION if row.compute or row.memory else None,
            errors=tuple(notes) if position == 0 else (),
        )
        for position, (gpu, row) in enumerate(sorted(rows.items()))
    ]


# --- amd-smi metric ------------------------------------------------------------------------------

METRIC = "amd-smi metric"


@dataclass(frozen=True)
class GpuMetrics:
    """One GPU's operating point as `amd-smi metric` printed it; None where it printed none."""

    index: int | None
    bdf: str | None = None
    clock_mhz: int | None = None  # the GFX clock (the highest of its XCDs' GFX_n)
    max_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    power_w: float | None = None  # socket power
    temperature_c: float | None = None  # hotspot (junction); the summary view's Temp
    edge_temperature_c: float | None = None
    memory_temperature_c: float | None = None
    ecc_correctable: int | None = None
    ecc_uncorrectable: int | None = None
    ecc_deferred: int | None = None
    memory_bytes: int | None = None  # total VRAM
    used_memory_bytes: int | None = None

    def summary(self) -> str:
        """'gfx 132 MHz (max 2100), memory 900 MHz, 140 W, hotspot 37 C, ECC 0 correctable / 0 uncorrectable'."""
        parts = [
            f"gfx {self.clock_mhz} MHz" + (f" (max {self.max_clock_mhz})" if self.max_clock_mhz else "")
            if self.clock_mhz is not None
            else None,
            f"memory {self.memory_clock_mhz} MHz" if self.memory_clock_mhz is not None else None,
            f"{self.power_w:g} W" if self.power_w is not None else None,
            f"hotspot {self.temperature_c:g} C" if self.temperature_c is not None else None,
            f"edge {self.edge_temperature_c:g} C" if self.edge_temperature_c is not None else None,
            "ECC "
            + " / ".join(
                f"{count} {kind}"
                for count, kind in ((self.ecc_correctable, "correctable"), (self.ecc_uncorrectable, "uncorrectable"))
                if count is not None
            )
            if self.ecc_correctable is not None or self.ecc_uncorrectable is not None
            else None,
        ]
        return ", ".join(p for p in parts if p) or "no reading"


def _metric_entries(text: str) -> list[tuple[int | None, Mapping[str, Any]]]:
    if looks_like_json(text):
        entries: list[Any] = []
        for document in json_documents(text):
            listed = document.get("gpu_data") if isinstance(document, Mapping) else document
            entries += listed if isinstance(listed, list) else [document] if isinstance(document, Mapping) else []
        gpus = [e for e in entries if isinstance(e, Mapping) and _get(e, "gpu", "gpu_id") is not None]
        return [(_whole(_get(e, "gpu", "gpu_id")), e) for e in gpus]
    return [(number, block) for kind, number, block in text_blocks(text) if kind == "GPU"]


def _section(entry: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = _get(entry, name)
    return {str(k).lower(): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def _clocks(clock: Mapping[str, Any], engine: str) -> tuple[int | None, int | None]:
    """(current, max) MHz of an engine ('gfx': GFX_0 ... GFX_7, the highest; 'mem': MEM_0): ROCm
    6.1+ print one entry per engine instance, ROCm 6.0 one 'gfx' with cur_clk."""
    current: list[int] = []
    highest: list[int] = []
    for name, value in clock.items():
        if not (name == engine or re.fullmatch(rf"{engine}_\d+", name)) or not isinstance(value, Mapping):
            continue
        reading = {str(k).lower(): v for k, v in value.items()}
        now = _whole(reading.get("clk", reading.get("cur_clk")))
        top = _whole(reading.get("max_clk"))
        current += [now] if now is not None else []
        highest += [top] if top is not None else []
    return (max(current) if current else None, max(highest) if highest else None)


def _metrics(position: int, index: int | None, entry: Mapping[str, Any]) -> GpuMetrics:
    clock = _section(entry, "clock")
    power = _section(entry, "power")
    temperature = _section(entry, "temperature")
    ecc = _section(entry, "ecc")
    usage = _section(entry, "mem_usage")
    gfx, gfx_max = _clocks(clock, "gfx")
    mem, mem_max = _clocks(clock, "mem")
    watts = next(
        (
            _number(power.get(k))
            for k in ("socket_power", "average_socket_power", "current_socket_power")
            if _number(power.get(k)) is not None
        ),
        None,
    )
    return GpuMetrics(
        index=index if index is not None else position,
        bdf=normalize_bdf(_get(entry, "bdf")),
        clock_mhz=gfx,
        max_clock_mhz=gfx_max,
        memory_clock_mhz=mem,
        max_memory_clock_mhz=mem_max,
        power_w=watts,
        temperature_c=_number(temperature.get("hotspot", temperature.get("junction"))),
        edge_temperature_c=_number(temperature.get("edge")),
        memory_temperature_c=_number(temperature.get("mem", temperature.get("vram"))),
        ecc_correctable=_whole(ecc.get("total_correctable_count", ecc.get("correctable_count"))),
        ecc_uncorrectable=_whole(ecc.get("total_uncorrectable_count", ecc.get("uncorrectable_count"))),
        ecc_deferred=_whole(ecc.get("total_deferred_count", ecc.get("deferred_count"))),
        memory_bytes=quantity_bytes(usage.get("total_vram"), "MB"),
        used_memory_bytes=quantity_bytes(usage.get("used_vram"), "MB"),
    )


def parse_amd_smi_metric_readings(text: str) -> list[GpuMetrics]:
    """`amd-smi metric [sections] [--json]`: each GPU's clocks, power, temperatures, ECC counts and
    memory use, where printed."""
    entries = _metric_entries(text)
    if not entries:
        raise found_nothing(METRIC, text, f"{METRIC}: no 'GPU: N' block or GPU entry in the output")
    return [_metrics(position, index, entry) for position, (index, entry) in enumerate(entries)]


def parse_amd_smi_metric(text: str) -> list[AmdGpuFacts]:
    """The facts of `amd-smi metric` that describe the GPU itself (its memory and top clocks), so
    a folder holding only this view still lists its GPUs."""
    return [
        AmdGpuFacts(
            source=METRIC,
            index=reading.index,
            bdf=reading.bdf,
            memory_bytes=reading.memory_bytes,
            max_clock_mhz=reading.max_clock_mhz,
            max_memory_clock_mhz=reading.max_memory_clock_mhz,
        )
        for reading in parse_amd_smi_metric_readings(text)
    ]


# --- amd-smi (no arguments): the ROCm 7 summary table ------------------------------------------

DEFAULT_VIEW = "amd-smi"
_BOX_FIRST = re.compile(r"^\|\s*((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*?)\s*\|(.*)\|\s*$")
_BOX_SECOND = re.compile(r"^\|\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s*\|(.*)\|\s*$")


@dataclass(frozen=True)
class _SummaryRow:
    index: int
    bdf: str | None
    name: str
    compute: str | None
    memory: str | None
    right_first: str  # Mem-Uti, Temp, UEC, Power-Usage
    right_second: str  # GFX-Uti, Fan, Mem-Usage


def _summary_rows(text: str) -> list[_SummaryRow]:
    """The GPU rows of `amd-smi`'s box: two lines per GPU ('| BDF  GPU-Name | Mem-Uti Temp UEC
    Power |' then '| GPU HIP-ID OAM-ID Partition-Mode | GFX-Uti Fan Mem-Usage |')."""
    lines = clean_text(text).splitlines()
    rows = []
    for first, second in zip(lines, lines[1:]):
        top, bottom = _BOX_FIRST.match(first.strip()), _BOX_SECOND.match(second.strip())
        if top is None or bottom is None:
            continue
        mode = bottom.group(4)
        rows.append(
            _SummaryRow(
                index=int(bottom.group(1)),
                bdf=normalize_bdf(top.group(1)),
                name=top.group(2).lstrip(". "),  # a long name is cut to '...Instinct MI300X OAM'
                compute=_mode(mode, _MODES),
                memory=_mode(mode, _NPS),
                right_first=top.group(3),
                right_second=bottom.group(5),
            )
        )
    return _with_package_modes(rows)


def _with_package_modes(rows: list[_SummaryRow]) -> list[_SummaryRow]:
    """A partition printed with 'N/A' modes takes those of the partition before it at the same PCI
    device (0000:05:00.1 after 0000:05:00.0 in DPX: ROCm/amdsmi#132)."""
    result: list[_SummaryRow] = []
    for row in rows:
        before = result[-1] if result else None
        same = before is not None and row.bdf and before.bdf and row.bdf[:-2] == before.bdf[:-2]
        if before is not None and same and row.compute is None and row.memory is None:
            row = replace(row, compute=before.compute, memory=before.memory)
        result.append(row)
    return result


def _used_and_total(text: str, unit: str) -> tuple[float | None, float | None]:
    """'283/196592 MB' -> (283, 196592); 'N/A/750 W' -> (None, 750)."""
    found = re.search(rf"(N/A|[\d.]+)\s*/\s*(N/A|[\d.]+)\s*{unit}\b", text)
    return (_number(found.group(1)), _number(found.group(2))) if found else (None, None)


def parse_amd_smi_default(text: str) -> list[AmdGpuFacts]:
    """`amd-smi` with no arguments (ROCm 7): each GPU's PCI address, name (or its PCI device ID,
    which amd-smi prints where it has no name), partition modes and memory."""
    rows = _summary_rows(text)
    if not rows:
        raise found_nothing(DEFAULT_VIEW, text, f"{DEFAULT_VIEW}: no GPU row in the summary table")
    facts = []
    for row in rows:
        _, total = _used_and_total(row.right_second, "MB")
        hex_id = re.fullmatch(r"0x[0-9a-fA-F]{1,4}", row.name)
        facts.append(
            AmdGpuFacts(
                source=DEFAULT_VIEW,
                index=row.index,
                bdf=row.bdf,
                market_name=None if hex_id or not _present(row.name) else row.name,
                device_id=int(row.name, 16) if hex_id else None,
                compute_partition=row.compute,
                memory_partition=row.memory,
                partition_source=DEFAULT_VIEW if row.compute or row.memory else None,
                memory_bytes=None if total is None else int(total) * 1024**2,
            )
        )
    return facts


def parse_amd_smi_default_readings(text: str) -> list[GpuMetrics]:
    """The readings of `amd-smi`'s summary: temperature, power, uncorrectable ECC count, memory use."""
    readings = []
    for row in _summary_rows(text):
        watts, _ = _used_and_total(row.right_first, "W")
        used, total = _used_and_total(row.right_second, "MB")
        temperature = re.search(r"(\d+(?:\.\d+)?)\s*°?C\b", row.right_first)
        cells = row.right_first.split()
        uec = next((cells[i + 1] for i, c in enumerate(cells[:-1]) if c in ("C", "°C", "N/A") and i >= 1), None)
        readings.append(
            GpuMetrics(
                index=row.index,
                bdf=row.bdf,
                power_w=watts,
                temperature_c=float(temperature.group(1)) if temperature else None,
                ecc_uncorrectable=_whole(uec),
                memory_bytes=None if total is None else int(total) * 1024**2,
                used_memory_bytes=None if used is None else int(used) * 1024**2,
            )
        )
    return readings
