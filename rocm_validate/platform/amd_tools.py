"""Parsers for what AMD's tools say about GPUs: amd-smi, rocm-smi, rocminfo and the amdsmi package.

Each parser is a pure function from a tool's output (text or the package's dicts) to
`AmdGpuFacts`, so it is tested with outputs in each tool's format for devices we cannot run on.
The same parsers serve live discovery (`devices.py`) and offline discovery from saved outputs
(`offline.py`). The formats moved between ROCm releases; each parser names the shapes it
accepts. A document that is not the tool's output at all raises `ToolOutputError`; a part of
it that is not the expected shape (a section written as "N/A", a cache table as a dict) is
unavailable, and said so in the GPU's `errors`: one unreadable section never loses the rest.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform import identity, tool_failures
from rocm_validate.platform.arch import normalize_gfx, parse_gcn_arch
from rocm_validate.text import clip

_UNIT_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_QUANTITY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)")
_NOT_AVAILABLE = {"", "N/A", "NA", "UNKNOWN", "NONE"}

# `amd-smi static` sections discovery reads: asking for them alone keeps the call fast and its
# output small. Releases without one of these flags (ROCm 6.0 has no --clock) refuse the whole
# line, so callers fall back to the plain command.
AMD_SMI_STATIC_SECTIONS = ("--asic", "--bus", "--vram", "--cache", "--partition", "--driver", "--clock")
AMD_SMI_STATIC_JSON = ("amd-smi", "static", *AMD_SMI_STATIC_SECTIONS, "--json")
AMD_SMI_STATIC_JSON_PLAIN = ("amd-smi", "static", "--json")


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
    partition_source: str | None = None  # the tool (or "sysfs", or "inferred from ...") that gave the modes
    uuid: str | None = None
    device_id: int | None = None  # the PCI device ID (0x74a1): what decides the product (`identity`)
    subsystem_id: int | None = None
    derived: tuple[str, ...] = ()  # facts no tool printed, filled from the product table ("name", "arch")
    errors: tuple[str, ...] = ()  # parts of the output that were unreadable, each with where it was


def _present(value: Any) -> bool:
    return value is not None and str(value).strip().upper() not in _NOT_AVAILABLE


def _text(value: Any) -> str | None:
    return str(value).strip() if _present(value) else None


def _int(value: Any) -> int | None:
    if not _present(value) or isinstance(value, bool):
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
    number: Any
    if isinstance(value, Mapping):
        number, unit = value.get("value"), str(value.get("unit") or default_unit)
    else:
        number, unit = value, default_unit
    if not _present(number) or isinstance(number, bool):
        return None
    if isinstance(number, str):
        match = _QUANTITY_RE.match(number)
        if not match:
            return None
        number, unit = match.group(1), match.group(2) or unit
    scale = _UNIT_BYTES.get(unit.upper().replace("IB", "B"))
    return None if scale is None else int(float(number) * scale)


def _mhz(value: Any) -> int | None:
    """'1700 MHz', '2100', 2100, {'value': 2100, 'unit': 'MHz'} -> 2100."""
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


def pci_device_address(bdf: str) -> str:
    """'0000:0c:00.3' -> '0000:0c:00': the PCI device, which the partitions of one package share."""
    return bdf.rsplit(".", 1)[0]


def bdf_from_bdfid(bdfid: int, domain: int = 0) -> str:
    """rocminfo's decimal BDFID (bus << 8 | device << 3 | function) -> '0000:26:00.0'."""
    return f"{domain:04x}:{(bdfid >> 8) & 0xFF:02x}:{(bdfid >> 3) & 0x1F:02x}.{bdfid & 0x7}"


def market_name(value: Any) -> str | None:
    """The product name, with the board-code form some tools print ('Aqua Vanjaram [Instinct
    MI300A]') reduced to the name PyTorch reports ('AMD Instinct MI300A')."""
    text = _text(value)
    if text is None or _hex_id(text):
        return None  # older rocm-smi prints the device ID where the name belongs ('Card series: 0x740f')
    bracketed = re.search(r"\[(Instinct [^\]]+)\]", text)
    return f"AMD {bracketed.group(1)}" if bracketed else text


def _hex_id(value: Any) -> bool:
    """Whether a tool printed a PCI device ID ('0x740f') where a name or model belongs."""
    return bool(re.fullmatch(r"0x[0-9a-f]{1,4}", str(value or "").strip().lower()))


def _named_by_id(device_id: Any) -> str | None:
    """The product name a PCI device ID stands for, where it stands for one product."""
    entry = identity.pci_device(device_id)
    return entry.products[0].name if entry is not None and len(entry.products) == 1 else None


def _arch_of(gfx: Any, device_id: Any) -> str | None:
    """The ISA from a gfx name when the tool printed one, else from the PCI device id."""
    name = _text(gfx)
    if name:
        return normalize_gfx(name)
    entry = identity.pci_device(device_id)
    return entry.products[0].arch if entry is not None else None


def _identity_facts(name: str | None, gfx: Any, device_id: Any) -> dict[str, Any]:
    """A GPU's name and ISA as the tool printed them, else from its PCI device ID in the product
    table (`identity`), those marked as derived: the same for every reader."""
    printed_arch = normalize_gfx(str(gfx).strip()) if _present(gfx) else None
    table_name = None if name else _named_by_id(device_id)
    table_arch = None if printed_arch else _arch_of(None, device_id)
    derived = tuple(what for what, value in (("name", table_name), ("arch", table_arch)) if value)
    return {"market_name": name or table_name, "arch": printed_arch or table_arch, "derived": derived}


def clean_text(text: str) -> str:
    """A tool's output as people save and paste it, made plain: CRLF and CR line ends, terminal
    colour codes (the escape character itself, or '^[' where a paste rendered it) removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"(?:\x1b|\^\[)\[[0-9;]*[A-Za-z]", "", text)


def _cache_entries(value: Any) -> list[Mapping[str, Any]]:
    """The cache table in any of its forms: a list (ROCm 6.1+ JSON, amdsmi 6.1+ `{"cache": [...]}`),
    or a dict of entries (ROCm 6.0 `{"cache 0": {...}}`, the text output's CACHE_0 ...)."""
    if isinstance(value, Mapping):
        listed = value.get("cache")
        value = listed if isinstance(listed, list) else list(value.values())
    return [entry for entry in value if isinstance(entry, Mapping)] if isinstance(value, list) else []


def _is_data_cache(entry: Mapping[str, Any]) -> bool:
    properties = entry.get("cache_properties")
    if isinstance(properties, str):
        properties = properties.split(",")
    if properties:
        return "DATA_CACHE" in {str(p).strip().upper() for p in properties}
    flag = entry.get("data_cache")  # ROCm 6.0: a flag per kind ("ENABLED" in the CLI, a bool in the package)
    return flag is None or flag is True or str(flag).strip().upper() == "ENABLED"


def _cache_sizes(entries: Iterable[Mapping[str, Any]], size_unit: str) -> tuple[int | None, int | None]:
    """(L2 bytes, last-level bytes) from amd-smi / amdsmi cache tables; last level is L3 (MALL) if any."""
    by_level: dict[int, int] = {}
    for entry in entries:
        if not _is_data_cache(entry):
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


def _shown(value: Any) -> str:
    text = repr(value)
    return clip(text, 40)


class _Sections:
    """One GPU's entry of `amd-smi static`: each section read is checked for its shape, and one
    that is not (the bare string "N/A" where an object belongs) is recorded and left out."""

    def __init__(self, entry: Mapping[str, Any], where: str) -> None:
        self.entry = entry
        self.where = where
        self.errors: list[str] = []

    def get(self, *names: str, shapes: tuple[type, ...] = (Mapping,)) -> Any:
        """The first of `names` present in the entry, if it has one of `shapes`; else None."""
        return self.within(self.entry, names, shapes, "section")

    def within(self, parent: Any, names: tuple[str, ...], shapes: tuple[type, ...], what: str) -> Any:
        if not isinstance(parent, Mapping):
            return None
        for name in names:
            if name in parent:
                value = parent[name]
                if isinstance(value, shapes):
                    return value
                self.errors.append(f"{self.where}: {what} '{name}' is {_shown(value)}, not a table: unavailable")
                return None
        return None


def _static_facts(entry: Mapping[str, Any], source: str, position: int) -> AmdGpuFacts:
    """One GPU's `amd-smi static` entry (JSON of any release, or the text form read into the same
    keys) -> AmdGpuFacts. ROCm 6.0 names the cache section `cache` and sizes `vram_size_mb`; 6.1+
    `cache_info` and `size`, with {value, unit} objects in JSON; ROCm 7 `accelerator_partition`."""
    index = _int(entry.get("gpu"))
    sections = _Sections(entry, f"{source}: GPU {index if index is not None else position}")
    asic = sections.get("asic") or {}
    bus = sections.get("bus") or {}
    vram = sections.get("vram") or {}
    driver = sections.get("driver") or {}
    clock = sections.get("clock") or {}
    partition = sections.get("partition") or {}
    cache = sections.get("cache_info", "cache", shapes=(Mapping, list))
    l2, last = _cache_sizes(_cache_entries(cache), "KB")
    sys_clock = sections.within(clock, ("sys",), (Mapping,), "clock") or {}
    mem_clock = sections.within(clock, ("mem",), (Mapping,), "clock") or {}
    board = sections.get("board") or {}
    compute = partition.get("accelerator_partition", partition.get("compute_partition"))
    memory_mode = partition.get("memory_partition")
    device_id = identity.pci_id(_text(asic.get("device_id")))
    return AmdGpuFacts(
        source=source,
        index=index,
        bdf=normalize_bdf(bus.get("bdf")),
        **_identity_facts(
            market_name(asic.get("market_name")) or market_name(board.get("product_name")),
            asic.get("target_graphics_version"),
            device_id,
        ),
        compute_units=_int(asic.get("num_compute_units", asic.get("num_of_compute_units"))),
        memory_bytes=quantity_bytes(vram.get("size", vram.get("vram_size_mb")), "MB"),
        l2_cache_bytes=l2,
        last_level_cache_bytes=last,
        max_clock_mhz=_max_level_mhz(sys_clock.get("frequency_levels")),
        max_memory_clock_mhz=_max_level_mhz(mem_clock.get("frequency_levels")),
        driver_version=driver_version(driver.get("version", driver.get("driver_version"))),
        compute_partition=_text(compute),
        memory_partition=_text(memory_mode),
        partition_id=_int(partition.get("partition_id")),
        partition_source=source if _present(compute) or _present(memory_mode) else None,
        device_id=device_id,
        subsystem_id=identity.pci_id(_text(asic.get("subsystem_id"))),
        errors=tuple(sections.errors),
    )


def found_nothing(tool: str, text: str, fallback: str) -> ToolOutputError:
    """The error for an output that lists no GPU: the tool's own reason where it printed one
    (`tool_failures`), else `fallback`."""
    reason = tool_failures.diagnose(tool.split()[0], clean_text(text))
    return ToolOutputError(reason.message() if reason is not None else fallback)


# What people paste before a tool's JSON: its warning ('WARNING: User is missing ...'), the shell
# prompt and command ('[root@node ~]# amd-smi static --json', 'user@host:~$ ...', '$ ...').
_PROMPT = re.compile(r"\s*(?:\[[^\]\n]*\]\s*[#$%]|[\w.-]+@[\w.-]+:[^\n]*?[#$]|[$#%>])(?:\s.*)?")
_PREAMBLE = re.compile(rf"(?:{_PROMPT.pattern}|\s*WARNING\b.*|\s*)")


def _json_line(line: str) -> bool:
    return line.lstrip().startswith(("[", "{")) and not _PROMPT.fullmatch(line.rstrip("\r\n"))


def json_start(text: str) -> int | None:
    """Where the first line that opens a list or an object starts (a prompt such as
    '[root@node ~]# ...' opens neither), or None."""
    offset = 0
    for line in text.splitlines(keepends=True):
        if _json_line(line):
            return offset + len(line) - len(line.lstrip())
        offset += len(line)
    return None


def looks_like_json(text: str) -> bool:
    """Whether the output is JSON: its first line past the prompt and warnings opens a list or an object."""
    first = next((line for line in clean_text(text).splitlines() if not _PREAMBLE.fullmatch(line)), "")
    return _json_line(first)


def json_document(text: str, tool: str) -> Any:
    """The JSON a tool printed, from the first line that opens a list or an object: amd-smi
    prints 'WARNING: User is missing the following required groups ...' first when the user is
    not in the render / video groups; text after the document (a prompt, a log line) is ignored.
    A document that stops before its closing brackets is said to be cut short, with the line."""
    text = clean_text(text)
    offset = json_start(text)
    if offset is None:
        raise found_nothing(tool, text, f"{tool} printed no JSON (no line opens a list or an object)")
    document = text[offset:]
    try:
        return json.JSONDecoder().raw_decode(document)[0]
    except json.JSONDecodeError as exc:
        line = text[: offset + exc.pos].count("\n") + 1
        if exc.pos >= len(document.rstrip()):
            raise ToolOutputError(
                f"{tool}: the JSON is cut short (truncated) at line {line}: it ends before its closing brackets. "
                "Save the command's whole output again"
            ) from None
        raise ToolOutputError(f"{tool} printed invalid JSON at line {line}: {exc.msg}") from None


def parse_amd_smi_static_json(text: str) -> list[AmdGpuFacts]:
    """`amd-smi static [sections] --json`: a bare list of GPUs on ROCm 6.x, `{"gpu_data": [...]}`
    (with "cpu_data" beside it on an APU) on ROCm 7."""
    tool = "amd-smi static --json"
    data = json_document(text, tool)
    entries = data.get("gpu_data") if isinstance(data, Mapping) else data
    if not isinstance(entries, list):
        raise ToolOutputError(f"{tool}: expected a list of GPUs or {{'gpu_data': [...]}}, found {type(data).__name__}")
    facts = []
    for position, entry in enumerate(entries):
        if isinstance(entry, Mapping):
            facts.append(_static_facts(entry, tool, position))
    return facts


_BLOCK_HEAD = re.compile(r"^\s*(GPU|CPU|CORE|NIC|SWITCH):\s*(\d+)\s*$")


def text_blocks(text: str) -> list[tuple[str, int, dict[str, Any]]]:
    """amd-smi's human-readable output ('GPU: 0' then indented 'KEY: value' lines) as
    (kind, number, nested dict with lower-cased keys). Lines without a key (prompts, '...',
    the group warning, CPU affinity masks) are skipped."""
    blocks: list[tuple[str, int, dict[str, Any]]] = []
    stack: list[tuple[int, dict[str, Any]]] = []
    for line in clean_text(text).expandtabs(8).splitlines():
        head = _BLOCK_HEAD.match(line)
        indent = len(line) - len(line.lstrip())
        if head:
            root: dict[str, Any] = {}
            blocks.append((head.group(1), int(head.group(2)), root))
            stack = [(indent, root)]
            continue
        content = line.strip()
        if not stack or ":" not in content or indent <= stack[0][0]:
            continue
        key, _, value = content.partition(":")
        key = re.sub(r"\s+", "_", key.strip().lower())
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value.strip():
            parent.setdefault(key, value.strip())
        else:
            child: dict[str, Any] = {}
            parent[key] = child
            stack.append((indent, child))
    return blocks


def parse_amd_smi_static_text(text: str) -> list[AmdGpuFacts]:
    """`amd-smi static [sections]` in its human-readable form (what people paste into tickets)."""
    gpus = [(number, block) for kind, number, block in text_blocks(text) if kind == "GPU"]
    if not gpus:
        raise found_nothing("amd-smi static", text, "amd-smi static: no 'GPU: N' block in the output")
    return [_static_facts({"gpu": number, **block}, "amd-smi static", i) for i, (number, block) in enumerate(gpus)]


def device_id_of_uuid(uuid: str | None) -> int | None:
    """amd-smi's GPU UUID carries the PCI device ID in its first group ('9fff74b9-0000-...' is
    0x74b9): an `amd-smi list` names the product without a static section."""
    match = re.match(r"^[0-9a-f]{2}ff([0-9a-f]{4})-", (uuid or "").strip().lower())
    return int(match.group(1), 16) if match else None


def _list_entries(text: str) -> list[tuple[int, Mapping[str, Any]]]:
    """`amd-smi list` blocks as (GPU number, fields): the text form, or its `--json` list."""
    if looks_like_json(text):
        data = json_document(text, "amd-smi list --json")
        entries = data.get("gpu_data", []) if isinstance(data, Mapping) else data
        return [(_int(e.get("gpu")) or i, e) for i, e in enumerate(entries or []) if isinstance(e, Mapping)]
    return [(number, block) for kind, number, block in text_blocks(text) if kind == "GPU"]


def parse_amd_smi_list(text: str) -> list[AmdGpuFacts]:
    """`amd-smi list [-e] [--json]`: one block per GPU with its BDF and UUID; in CPX each partition
    is its own function of the package's PCI device (0c:00.0 ... 0c:00.7)."""
    facts = []
    for number, block in _list_entries(text):
        device_id = device_id_of_uuid(_text(block.get("uuid")))
        facts.append(
            AmdGpuFacts(
                source="amd-smi list",
                index=number,
                bdf=normalize_bdf(block.get("bdf")),
                **_identity_facts(None, None, device_id),
                partition_id=_int(block.get("partition_id")),
                uuid=_text(block.get("uuid")),
                device_id=device_id,
            )
        )
    if not facts:
        raise found_nothing("amd-smi list", text, "amd-smi list: no 'GPU: N' block in the output")
    return facts


def _rocm_smi_name(name: str | None, fields: Mapping[str, Any], device_id: int | None) -> str | None:
    """The card's name; rocm-smi 6.x prints the board's pci.ids name as its 'Subsystem ID' ('NITRO+
    RX 7900 XTX Vapor-X'), which tells the product where the series names several ('Navi 31
    [Radeon RX 7900 XT/7900 XTX/7900M]')."""
    board = market_name(fields.get("subsystem id"))
    if board is None or device_id is None or identity.identify(device_id, name).product is not None:
        return name
    return board if identity.identify(device_id, board).product is not None else name


def _rocm_smi_card(index: int, card: Mapping[str, Any], driver: str | None, source: str) -> AmdGpuFacts:
    """One card of rocm-smi, keyed as its JSON and text print it (key case varies by release:
    'Card Series' / 'Card series'); rocm-smi before 6.x has no GFX Version, only the device id,
    which `--showproduct` prints as the 'Card Model'."""
    fields = {str(k).strip().lower(): v for k, v in card.items()}
    device_id = identity.pci_id(_text(fields.get("device id", fields.get("gpu id")))) or next(
        (identity.pci_id(value) for value in (fields.get("card series"), fields.get("card model")) if _hex_id(value)),
        None,
    )
    compute = fields.get("compute partition")
    memory_mode = fields.get("memory partition")
    return AmdGpuFacts(
        source=source,
        index=index,
        bdf=normalize_bdf(fields.get("pci bus")),
        **_identity_facts(
            _rocm_smi_name(market_name(fields.get("device name") or fields.get("card series")), fields, device_id),
            fields.get("gfx version"),
            device_id,
        ),
        memory_bytes=_int(fields.get("vram total memory (b)")),
        driver_version=driver or _text(fields.get("driver version")),
        compute_partition=_text(compute),
        memory_partition=_text(memory_mode),
        partition_id=_int(fields.get("partition id")),
        partition_source=source if _present(compute) or _present(memory_mode) else None,
        device_id=device_id,
        subsystem_id=identity.pci_id(_text(fields.get("subsystem id"))),
    )


def parse_rocm_smi_json(text: str) -> list[AmdGpuFacts]:
    """`rocm-smi [--showproductname --showbus --showmeminfo vram ...] --json` or `rocm-smi -a --json`:
    {"card0": {...}, "system": {"Driver version": ...}}."""
    data = json_document(text, "rocm-smi --json")
    if not isinstance(data, Mapping):
        raise ToolOutputError("rocm-smi --json: expected an object keyed by card0, card1, ...")
    system = data.get("system")
    driver = _text(system.get("Driver version")) if isinstance(system, Mapping) else None
    facts: list[AmdGpuFacts] = []
    for key, card in data.items():
        match = re.fullmatch(r"card(\d+)", str(key))
        if match and isinstance(card, Mapping):
            facts.append(_rocm_smi_card(int(match.group(1)), card, driver, "rocm-smi --json"))
    if not facts:
        raise found_nothing("rocm-smi", text, "rocm-smi --json: no card entry (card0, card1, ...) in the output")
    return sorted(facts, key=lambda f: f.index if f.index is not None else -1)


_ROCM_SMI_LINE = re.compile(r"^\s*GPU\[(\d+)\]\s*:\s*([^:]+?):\s*(.*?)\s*$")
# The driver: rocm-smi's own line, or `amd-smi version` pasted beside it ('... | amdgpu version: 6.10.5 | ...').
_ROCM_SMI_DRIVER = re.compile(
    r"^\s*(?:GPU\[\d+\]\s*:\s*)?Driver version:\s*(\S+)|\bamdgpu version:\s*([0-9][\w.+-]*)",
    re.MULTILINE | re.IGNORECASE,
)
_NA = r"N/A|n/a|None"
# The concise table's rows, one shape per release: ROCm 6.3+ 'Device  Node  IDs (DID, GUID) ...
# Partitions (Mem, Compute, ID)'; ROCm 6.0 - 6.2 'Device  [Model : Revision] ... Partitions (Mem,
# Compute)' with the name on the line under; ROCm 5 'GPU  Temp (DieEdge)  AvgPwr ...' (no identity).
_CONCISE_IDS = re.compile(rf"^\s*(\d+)\s+(?:\d+\s+)?(0x[0-9a-fA-F]+|{_NA})\s*,\s*(?:\d+|{_NA})\s+(.*)$")
_CONCISE_MODEL = re.compile(rf"^\s*(\d+)\s+\[\s*(0x[0-9a-fA-F]+|{_NA})\s*:\s*(?:0x[0-9a-fA-F]+|{_NA})\s*\]\s+(.*)$")
_CONCISE_PLAIN = re.compile(r"^\s*(\d+)\s+(?:\d+(?:\.\d+)?\s*°?[cC]|N/A)\s")
_CONCISE_MODES = re.compile(rf"\b(NPS\d+|{_NA})\s*,\s*([A-Z]PX|{_NA})(?:\s*,\s*(\d+|{_NA}))?(?=\s|$)")


def _rocm_smi_showhw(lines: list[str], cards: dict[int, dict[str, Any]]) -> None:
    """`rocm-smi --showhw`: a table whose header names the columns ('GFX VER', 'BUS', 'PARTITION ID')."""
    for i, line in enumerate(lines):
        if line.strip().startswith("GPU ") and "GFX VER" in line and "BUS" in line:
            header = re.split(r"\s{2,}", line.strip())
            for row in lines[i + 1 :]:
                values = row.split()
                if not values or not values[0].isdigit() or len(values) != len(header):
                    break
                named = dict(zip(header, values))
                cards.setdefault(int(values[0]), {}).update(
                    {
                        "device id": named.get("DID"),
                        "gfx version": named.get("GFX VER"),
                        "pci bus": named.get("BUS"),
                        "partition id": named.get("PARTITION ID"),
                    }
                )


def _concise_rows(lines: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """The concise table's rows as (device index, fields), in the order printed; only lines
    under a 'Concise Info' banner or a header naming the columns are read."""
    rows: list[tuple[int, dict[str, Any]]] = []
    inside = False
    for i, line in enumerate(lines):
        if "End of ROCm SMI Log" in line:
            inside = False
            continue
        if "Concise Info" in line or re.match(r"^\s*(Device|GPU)\s+(Node|\[Model|Temp)", line):
            inside = True
            continue
        if not inside:
            continue
        row = _CONCISE_IDS.match(line) or _CONCISE_MODEL.match(line)
        fields: dict[str, Any] = {}
        if row:
            fields["device id"] = row.group(2)
            modes = _CONCISE_MODES.search(row.group(3))
            if modes:
                fields.update({"memory partition": modes.group(1), "compute partition": modes.group(2)})
                fields["partition id"] = modes.group(3)
            below = lines[i + 1] if i + 1 < len(lines) else ""
            if row.re is _CONCISE_MODEL and below.strip() and not re.match(r"^\s*(\d+\s|=)", below):
                fields["card series"] = below.strip()
        elif not _CONCISE_PLAIN.match(line):
            continue
        rows.append((int(line.split()[0]), fields))
    return rows


def _inherit_partition_rows(rows: list[tuple[int, dict[str, Any]]]) -> None:
    """ROCm 6.4.1 prints 'N/A' for the device ID and modes of every partition but the first
    (ROCm/ROCm#4759): a row with partition ID k > 0 right after partition k - 1 belongs to the
    same package and takes its ID and modes."""
    for (_, previous), (_, row) in zip(rows, rows[1:]):
        ids = _int(previous.get("partition id")), _int(row.get("partition id"))
        if ids[0] is None or ids[1] is None or ids[1] != ids[0] + 1:
            continue
        for key in ("device id", "memory partition", "compute partition"):
            if not _present(row.get(key)) and _present(previous.get(key)):
                row[key] = previous[key]


def _rocm_smi_concise(lines: list[str], cards: dict[int, dict[str, Any]]) -> None:
    """`rocm-smi` (the concise table) of any release; see `_concise_rows`."""
    rows = _concise_rows(lines)
    _inherit_partition_rows(rows)
    for index, fields in rows:
        card = cards.setdefault(index, {})
        for key, value in fields.items():
            if _present(value):
                card.setdefault(key, value)


def _rocm_smi_csv(lines: list[str], cards: dict[int, dict[str, Any]]) -> None:
    """`rocm-smi ... --csv`: a 'device,Card series,...' header over one 'card0,...' row per GPU."""
    header: list[str] = []
    for row in csv.reader(lines):
        cells = [cell.strip() for cell in row]
        if cells and cells[0].lower() == "device" and len(cells) > 1:
            header = cells
            continue
        match = re.fullmatch(r"card(\d+)", cells[0]) if header and cells else None
        if match:
            card = cards.setdefault(int(match.group(1)), {})
            for key, value in zip(header[1:], cells[1:]):
                if _present(value):
                    card.setdefault(key, value)


def parse_rocm_smi_text(text: str) -> list[AmdGpuFacts]:
    """`rocm-smi` in text: the 'GPU[0]  : Key: value' lines of `-a` / `-i` / `--showproduct` /
    `--showbus` ..., the `--showhw` table, the concise table and `--csv`, in any mix (a paste of several)."""
    text = clean_text(text)
    cards: dict[int, dict[str, Any]] = {}
    lines = text.splitlines()
    for line in lines:
        match = _ROCM_SMI_LINE.match(line)
        if match and _present(match.group(3)):
            cards.setdefault(int(match.group(1)), {}).setdefault(match.group(2).strip(), match.group(3))
    _rocm_smi_showhw(lines, cards)
    _rocm_smi_concise(lines, cards)
    _rocm_smi_csv(lines, cards)
    if not cards:
        raise found_nothing("rocm-smi", text, "rocm-smi: no GPU line, --showhw table or concise table in the output")
    driver = _ROCM_SMI_DRIVER.search(text)
    version = (driver.group(1) or driver.group(2)) if driver else None
    return [_rocm_smi_card(index, cards[index], version, "rocm-smi") for index in sorted(cards)]


# --- rocminfo -----------------------------------------------------------------------------------

# An agent's header as rocminfo prints it ('*******' / 'Agent 3' / '*******') and as people
# paste it: indented, stars on the same line, a remark after the number ('Agent 3 (first GPU)').
_AGENT_HEAD = re.compile(r"^[ \t*]*Agent[ \t]+\d+\b.*$", re.MULTILINE)
_AGENT_NAME = re.compile(r"^[ \t]*Name[ \t]*:[ \t]*(?!amdgcn-)\S.*$", re.MULTILINE)
_ROCK_VERSION = re.compile(r"ROCk module version\s+(\S+)\s+is loaded", re.IGNORECASE)
# A global memory pool: 'Segment: GLOBAL; FLAGS: COARSE GRAINED' then 'Size: 268419072(0x...) KB',
# or condensed on one line: 'Pool 1: GLOBAL; COARSE GRAINED   268419072 KB'.
_POOL_LONG = re.compile(
    r"Segment[ \t]*:[ \t]*GLOBAL;[ \t]*(?:FLAGS:)?[ \t]*([^\n]*?)[ \t]*\n[ \t]*Size[ \t]*:[ \t]*(\d+)"
)
_POOL_SHORT = re.compile(
    r"Pool[ \t]+\d+[ \t]*:[ \t]*GLOBAL;[ \t]*(?:FLAGS:)?[ \t]*([A-Z ,]*?)[ \t]+(\d+)[ \t]*(?:\(0x[0-9a-fA-F]+\))?[ \t]*KB"
)
_ISA = re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-fA-F]+(?::[A-Za-z0-9_]+[+-])*)(?=[\s,]|$)")


def _rocminfo_field(block: str, label: str) -> str | None:
    match = re.search(rf"^[ \t]*{re.escape(label)}[ \t]*:[ \t]*(.*?)[ \t]*$", block, re.MULTILINE)
    return match.group(1) if match else None


def _rocminfo_cache_kb(block: str, level: str) -> int | None:
    match = re.search(rf"^[ \t]*{level}[ \t]*:[ \t]*(\d+)", block, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _rocminfo_hex(value: str | None) -> int | None:
    """'29857(0x74a1)' -> 0x74a1; '0x74a1' and '29857' too."""
    if not value:
        return None
    inner = re.search(r"\(0x([0-9a-fA-F]+)\)", value)
    return int(inner.group(1), 16) if inner else _int(value)


def _coarse_pool_bytes(block: str) -> int | None:
    """The GPU agent's coarse-grained global pool (its device memory), in either form."""
    for flags, size in [*_POOL_LONG.findall(block), *_POOL_SHORT.findall(block)]:
        if "COARSE" in flags.upper() and "FINE" not in flags.upper():
            return int(size) * 1024
    return None


def agent_blocks(text: str) -> list[str]:
    """rocminfo's agents, one text block each: split at the 'Agent N' headers, or, in a paste that
    lost them, at each agent's 'Name:' line (an ISA's name starts with 'amdgcn-' and is not one).
    A paste that starts part-way into an agent (its 'Name:' line cut off) keeps that agent too,
    where what comes before the first header says its Device Type."""
    heads = list(_AGENT_HEAD.finditer(text)) or list(_AGENT_NAME.finditer(text))
    ends = [m.start() for m in heads[1:]] + [len(text)]
    blocks = [text[m.start() : end] for m, end in zip(heads, ends)]
    before = text[: heads[0].start()] if heads else text
    return [before, *blocks] if _rocminfo_field(before, "Device Type") else blocks


def rocminfo_cut(text: str) -> str | None:
    """How a rocminfo shows it was cut short, if it does: no '*** Done ***' line and its last agent
    stopping before its 'ISA Info' section."""
    blocks = agent_blocks(clean_text(text))
    if not blocks or "*** Done ***" in text or not any(_rocminfo_field(b, "Device Type") for b in blocks):
        return None
    if re.search(r"^[ \t]*ISA Info", blocks[-1], re.MULTILINE) or re.search(r"^[ \t]*ISA \d+:", blocks[-1], re.M):
        return None
    return f"rocminfo's agent {len(blocks)} stops before its ISA Info"


def _no_gpu_agent(blocks: list[str]) -> ToolOutputError:
    """Why a rocminfo that lists agents lists no GPU, and what to do."""
    cpus = [_rocminfo_field(b, "Marketing Name") or _rocminfo_field(b, "Name") or "?" for b in blocks]
    named = ", ".join(dict.fromkeys(cpus))
    if any("MI300A" in cpu for cpu in cpus):
        return ToolOutputError(
            f"rocminfo lists {len(cpus)} CPU agents ({named}) and no GPU agent: the amdgpu driver did not "
            "initialise the MI300A's GPUs. Look for 'Fatal error during GPU init' in `dmesg | grep amdgpu`, "
            "fix the driver (amdgpu-dkms for this kernel), reboot and save rocminfo again"
        )
    return ToolOutputError(
        f"rocminfo lists {len(cpus)} CPU agent{'s' if len(cpus) != 1 else ''} ({named}) and no GPU agent: the "
        "amdgpu driver initialised no GPU, or this user cannot open /dev/kfd. Check `dmesg | grep amdgpu` and "
        "membership of the render and video groups, then save rocminfo again"
    )


def parse_rocminfo(text: str) -> list[AmdGpuFacts]:
    """`rocminfo` as it prints and as people paste it (indented, tab-separated, trailing spaces
    cut, CRLF, agent headers rewritten or missing, pools condensed on one line): one fact per
    agent whose Device Type is GPU, in agent order. Its L2 is the whole package's (all 8 XCDs of
    an MI300X: 32768 KB); the device memory is the GPU agent's coarse-grained global pool; the
    driver is the version in 'ROCk module version 6.8.5 is loaded'."""
    text = clean_text(text)
    blocks = agent_blocks(text)
    if not blocks:
        raise found_nothing(
            "rocminfo", text, "rocminfo: no agent in the output (neither 'Agent N' headers nor 'Name:' lines)"
        )
    rock = _ROCK_VERSION.search(text)
    facts: list[AmdGpuFacts] = []
    for block in blocks:
        if (_rocminfo_field(block, "Device Type") or "").upper() != "GPU":
            continue
        isa = _ISA.search(block)
        gcn = parse_gcn_arch(isa.group(1) if isa else (_rocminfo_field(block, "Name") or ""))
        bdfid = _int(_rocminfo_field(block, "BDFID"))
        l2 = _rocminfo_cache_kb(block, "L2")
        device_id = _rocminfo_hex(_rocminfo_field(block, "Chip ID")) or None
        facts.append(
            AmdGpuFacts(
                source="rocminfo",
                index=len(facts),
                bdf=bdf_from_bdfid(bdfid) if bdfid else None,
                **_identity_facts(
                    market_name(_rocminfo_field(block, "Marketing Name")),
                    gcn.name if gcn.name.startswith("gfx") else None,
                    device_id,
                ),
                arch_features=gcn.features,
                compute_units=_int(_rocminfo_field(block, "Compute Unit")),
                memory_bytes=_coarse_pool_bytes(block),
                l2_cache_bytes=l2,
                last_level_cache_bytes=_rocminfo_cache_kb(block, "L3") or l2,
                max_clock_mhz=_int(_rocminfo_field(block, "Max Clock Freq. (MHz)")),
                driver_version=rock.group(1) if rock else None,
                uuid=_text(_rocminfo_field(block, "Uuid")),
                device_id=device_id,
            )
        )
    if not facts:
        reason = tool_failures.diagnose("rocminfo", text)
        if reason is not None:
            raise ToolOutputError(reason.message())
        if rocminfo_cut(text):
            raise ToolOutputError(
                f"rocminfo stops part-way through agent {len(blocks)} and lists no GPU agent before the cut: the "
                "output was cut short, which says nothing of the GPUs; save the whole `rocminfo` again"
            )
        raise _no_gpu_agent(blocks)
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
    source: str = "amdsmi",
) -> AmdGpuFacts:
    """The dicts the amdsmi package returns for one processor handle -> AmdGpuFacts.

    asic: amdsmi_get_gpu_asic_info (no CU count nor gfx name before ROCm 6.2: the device id
    stands in); driver: amdsmi_get_gpu_driver_info; vram: amdsmi_get_gpu_vram_info (`vram_size`
    in MB, `vram_size_mb` on ROCm 6.1 and before); cache: amdsmi_get_gpu_cache_info (sizes in
    KB; `{"cache": [...]}`, or `{"cache 0": {...}}` on ROCm 6.0); clock: amdsmi_get_clock_info
    for the GFX clock (MHz; `max_clk` in every release).
    """
    l2, last = _cache_sizes(_cache_entries(cache or {}), "KB")
    vram = vram or {}
    return AmdGpuFacts(
        source=source,
        index=index,
        bdf=normalize_bdf(bdf),
        **_identity_facts(
            market_name(asic.get("market_name")), asic.get("target_graphics_version"), asic.get("device_id")
        ),
        compute_units=_int(asic.get("num_compute_units", asic.get("num_of_compute_units"))),
        memory_bytes=quantity_bytes(vram.get("vram_size", vram.get("vram_size_mb")), "MB"),
        l2_cache_bytes=l2,
        last_level_cache_bytes=last,
        max_clock_mhz=_int((clock or {}).get("max_clk")),
        driver_version=driver_version((driver or {}).get("driver_version")),
        compute_partition=_text(compute_partition),
        memory_partition=_text(memory_partition),
        partition_source=source if _present(compute_partition) or _present(memory_partition) else None,
        device_id=identity.pci_id(asic.get("device_id")),
        subsystem_id=identity.pci_id(asic.get("subsystem_id")),
    )


def merge_facts(primary: AmdGpuFacts, extra: AmdGpuFacts) -> AmdGpuFacts:
    """Fill the gaps of `primary` with what `extra` knows; `primary` wins where both know. The
    partition modes travel with their source; both tools' errors are kept."""
    printed = {"name": "market_name", "arch": "arch"}
    # a fact the primary only derived gives way to one the other tool printed
    overridden = {
        field
        for what, field in printed.items()
        if what in primary.derived and what not in extra.derived and getattr(extra, field) is not None
    }
    updates: dict[str, Any] = {
        name: getattr(extra, name)
        for name in primary.__dataclass_fields__
        if name not in ("source", "errors", "partition_source", "derived")
        and (getattr(primary, name) in (None, ()) or name in overridden)
        and getattr(extra, name) not in (None, ())
    }
    derived = tuple(
        what
        for what, field in printed.items()
        if (what in primary.derived and field not in updates) or (what in extra.derived and field in updates)
    )
    if derived != primary.derived:
        updates["derived"] = derived
    if "compute_partition" in updates or "memory_partition" in updates:
        updates["partition_source"] = primary.partition_source or extra.partition_source
    if extra.errors:
        updates["errors"] = primary.errors + extra.errors
    if not updates:
        return primary
    return replace(primary, source=f"{primary.source}+{extra.source}", **updates)


def match_facts(bdfs: list[str | None], facts: list[AmdGpuFacts], same_node: bool = False) -> list[AmdGpuFacts | None]:
    """Pair each device (by PCI address) with the tool's facts.

    The same address first, then the same PCI device (partitions differ only in the function,
    and torch reports function 0 for all of them), in order. Devices fall back to the tool's
    order only when the counts agree (no visibility mask) and either one side has no addresses
    or both were read on this node now (`same_node`: torch and a tool): two saved listings
    with addresses and none in common are of different cards, and stay unpaired.
    """
    remaining = list(facts)
    matched: list[AmdGpuFacts | None] = []
    for bdf in bdfs:
        key = normalize_bdf(bdf)
        hit = next((f for f in remaining if key and f.bdf == key), None) or next(
            (f for f in remaining if key and f.bdf and _same_device(f.bdf, key)), None
        )
        if hit is not None:
            remaining.remove(hit)
        matched.append(hit)
    addressed = any(normalize_bdf(b) for b in bdfs) and any(f.bdf for f in facts)
    if all(m is None for m in matched) and len(bdfs) == len(facts) and (same_node or not addressed):
        return list(facts)
    return matched


def _same_device(tool_bdf: str, torch_bdf: str) -> bool:
    """torch reports domain:bus:device without the function; partitions differ only in function."""
    return pci_device_address(tool_bdf) == pci_device_address(torch_bdf)
