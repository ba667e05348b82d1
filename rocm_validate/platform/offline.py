"""Describe a node from its saved tool outputs, without torch or a GPU; and save those outputs.

`rocm-validate bundle DIR` runs, on a node, the commands of `SAVED_OUTPUTS` (each with a
timeout) and saves what each printed in a file named by the command, plus `bundle.json`: what
ran, for how long, and what was missing or failed. A platform team attaches the folder to a
ticket; `rocm-validate devices --from DIR` then describes the node anywhere, with the parsers
live discovery uses (`amd_tools`, `nvidia_tools`) and the same `build_gpu_info`. A file, or a
part of one, that does not parse is an error in the description, never a crash.

An offline description carries the hardware and driver facts the tools print; the software
stack (torch, HIP / CUDA runtime, BLAS and attention libraries, `_scaled_mm`) is left empty,
since no torch ran.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform import amd_smi_views, amd_tools, arch, identity, partitions, peaks, topology
from rocm_validate.platform.amd_smi_views import GpuMetrics
from rocm_validate.platform.amd_tools import AmdGpuFacts
from rocm_validate.platform.devices import (
    DERIVED,
    DeviceInfo,
    NvmlFacts,
    StackFacts,
    TorchGpuFacts,
    build_gpu_info,
    run_tool,
    visibility,
)
from rocm_validate.platform.nvidia_tools import (
    NvidiaGpuFacts,
    NvidiaSmiLog,
    parse_nvidia_smi_xml,
)
from rocm_validate.platform.probing import ProbeErrors, one_line
from rocm_validate.platform.topology import GpuLink

_ROCM_SMI = ("rocm-smi", "--showproductname", "--showdriverversion", "--showbus", "--showmeminfo", "vram")
_ROCM_SMI_PARTITIONS = ("--showcomputepartition", "--showmemorypartition")
MANIFEST = "bundle.json"


@dataclass(frozen=True)
class SavedOutput:
    """One file of a bundle and the commands that print it, tried in order (an older release
    that refuses the first gets the next)."""

    file: str
    commands: tuple[tuple[str, ...], ...]


SAVED_OUTPUTS: tuple[SavedOutput, ...] = (
    SavedOutput("amd-smi-static.json", (amd_tools.AMD_SMI_STATIC_JSON, amd_tools.AMD_SMI_STATIC_JSON_PLAIN)),
    SavedOutput(
        "amd-smi-static.txt", (("amd-smi", "static", *amd_tools.AMD_SMI_STATIC_SECTIONS), ("amd-smi", "static"))
    ),
    SavedOutput("amd-smi-list.txt", (("amd-smi", "list", "-e"), ("amd-smi", "list"))),
    SavedOutput("amd-smi.txt", (("amd-smi",),)),
    SavedOutput("amd-smi-partition.json", (("amd-smi", "partition", "--json"),)),
    SavedOutput("amd-smi-partition.txt", (("amd-smi", "partition"),)),
    SavedOutput("amd-smi-topology.json", (("amd-smi", "topology", "--json"),)),
    SavedOutput("amd-smi-topology.txt", (("amd-smi", "topology"),)),
    SavedOutput("amd-smi-metric.json", (("amd-smi", "metric", "--json"),)),
    SavedOutput("amd-smi-metric.txt", (("amd-smi", "metric"),)),
    SavedOutput("rocminfo.txt", (("rocminfo",),)),
    SavedOutput("rocm-smi.json", ((*_ROCM_SMI, *_ROCM_SMI_PARTITIONS, "--json"), (*_ROCM_SMI, "--json"))),
    SavedOutput("rocm-smi.txt", ((*_ROCM_SMI, *_ROCM_SMI_PARTITIONS), _ROCM_SMI)),
    SavedOutput("nvidia-smi.xml", (("nvidia-smi", "-q", "-x"),)),
)
KNOWN_FILES = tuple(output.file for output in SAVED_OUTPUTS)


def _rocm_smi_text(text: str) -> list[AmdGpuFacts]:
    """rocm-smi text; a paste of only `rocm-smi --showtopo` lists its GPUs by its matrices."""
    try:
        return amd_tools.parse_rocm_smi_text(text)
    except ToolOutputError:
        try:
            return topology.parse_amd_smi_topology_gpus(text, "rocm-smi --showtopo")
        except ToolOutputError:
            pass
        raise


# The AMD outputs in the order their facts are trusted: the first that lists GPUs sets the list
# (and the GPU count), the others fill its gaps, matched by PCI address or, without one, by order.
_AMD_PARSERS: tuple[tuple[str, Callable[[str], list[AmdGpuFacts]]], ...] = (
    ("amd-smi-static.json", amd_tools.parse_amd_smi_static_json),
    ("amd-smi-static.txt", amd_tools.parse_amd_smi_static_text),
    ("amd-smi.txt", amd_smi_views.parse_amd_smi_default),
    ("amd-smi-partition.json", amd_smi_views.parse_amd_smi_partition),
    ("amd-smi-partition.txt", amd_smi_views.parse_amd_smi_partition),
    ("rocminfo.txt", amd_tools.parse_rocminfo),
    ("rocm-smi.json", amd_tools.parse_rocm_smi_json),
    ("rocm-smi.txt", _rocm_smi_text),
    ("amd-smi-list.txt", amd_tools.parse_amd_smi_list),
    ("amd-smi-topology.json", topology.parse_amd_smi_topology_gpus),
    ("amd-smi-topology.txt", topology.parse_amd_smi_topology_gpus),
    ("amd-smi-metric.json", amd_smi_views.parse_amd_smi_metric),
    ("amd-smi-metric.txt", amd_smi_views.parse_amd_smi_metric),
)
_TOPOLOGY_FILES = ("amd-smi-topology.json", "amd-smi-topology.txt", "rocm-smi.txt", "rocm-smi.json")

_METRIC_FILES = ("amd-smi-metric.json", "amd-smi-metric.txt")


@dataclass(frozen=True)
class OfflineNode:
    """A node as its saved outputs describe it."""

    files: tuple[str, ...]  # the known files that were read
    devices: tuple[DeviceInfo, ...]
    errors: tuple[str, ...]  # every problem once: unreadable files ('file: Type: message') and parts of them
    links: tuple[GpuLink, ...] = ()  # amd-smi topology: every ordered pair of GPUs
    metrics: tuple[GpuMetrics, ...] = ()  # amd-smi metric: each GPU's clocks, power, temperature, ECC counts
    truncated: tuple[str, ...] = ()  # files cut short ('rocm-smi.txt: [output truncated]')
    at_least: bool = False  # the GPU count is a lower bound: no output that lists that many was saved whole
    links_tool: str = "amd-smi topology"  # the view the links were read from


def read_saved_outputs(folder: Path) -> dict[str, str]:
    """The known files in `folder`, by name; other files are not read."""
    return {name: (folder / name).read_text(errors="replace") for name in KNOWN_FILES if (folder / name).is_file()}


def describe_outputs(outputs: Mapping[str, str]) -> OfflineNode:
    """The GPUs that saved tool outputs (file name -> text) describe. Pure: no tool runs."""
    errors = ProbeErrors()
    cut = {name: marker for name, text in outputs.items() if (marker := truncation_marker(text))}
    amd, at_least = _merged_amd_facts(outputs, errors, cut)
    links_file, links = _first_links(outputs)
    links_tool = "rocm-smi --showtopo" if links_file.startswith("rocm-smi") else topology.TOPOLOGY
    errors.messages.extend(topology.link_problems(links, links_tool))
    metrics = _saved(outputs, _METRIC_FILES, amd_smi_views.parse_amd_smi_metric_readings) or _saved(
        outputs, ("amd-smi.txt",), amd_smi_views.parse_amd_smi_default_readings
    )
    nvidia: NvidiaSmiLog | None = None
    if "nvidia-smi.xml" in outputs:
        nvidia = errors.run("nvidia-smi.xml", lambda: parse_nvidia_smi_xml(outputs["nvidia-smi.xml"]))
    unreadable = tuple(errors.messages)
    devices = [_amd_device(facts, position, unreadable) for position, facts in enumerate(amd)]
    if nvidia is not None:
        devices += [_nvidia_device(gpu, nvidia, unreadable) for gpu in nvidia.gpus]
    every_error = tuple(dict.fromkeys(error for found in (unreadable, *(d.errors for d in devices)) for error in found))
    return OfflineNode(
        tuple(name for name in KNOWN_FILES if name in outputs),
        tuple(devices),
        every_error,
        tuple(links),
        tuple(metrics),
        tuple(f"{name}: {marker}" for name, marker in cut.items()),
        at_least,
        links_tool,
    )


def _first_links(outputs: Mapping[str, str]) -> tuple[str, list[GpuLink]]:
    """The links of the first saved output that has any (amd-smi topology, then rocm-smi --showtopo)."""
    for name in (n for n in _TOPOLOGY_FILES if n in outputs):
        links = ProbeErrors().run(name, partial(topology.parse_amd_smi_topology, outputs[name]), [])
        if links:
            return name, links
    return "", []


def _saved(outputs: Mapping[str, str], names: tuple[str, ...], parse: Callable[[str], list[Any]]) -> list[Any]:
    """What the first of `names` the folder holds says; a file that does not parse was said
    already by the GPU listing (`_merged_amd_facts`), so it gives nothing here and no second error."""
    name = next((n for n in names if n in outputs), None)
    return ProbeErrors().run(name or "", partial(parse, outputs[name]), []) if name else []


# How people and tools mark an output cut short: an author's note, a lone '...' line, a pager's
# '(END)'-less stop. A JSON document cut short is said by `amd_tools.json_document`.
_TRUNCATION = re.compile(
    r"(?:[\[(<] ?)?(?:\.{3}|…)? ?(?:[\[(<] ?)?(?:rest of )?(?:the )?(?:output )?(?:was |is )?truncated\b.*"
    r"|\[ ?(?:\.{3}|…) ?\]|\.{3,}|…|[<\[] ?snip ?[>\]]|\( ?\d+ more lines?[^)]*\)",
    re.IGNORECASE,
)


def truncation_marker(text: str) -> str | None:
    """How an output shows it was cut short, if it does: a marker line ('[output truncated]', a
    '...' line, '<snip>'), a JSON document that stops before its closing brackets, or an amd-smi
    text whose last 'GPU: N' block stops part-way (fewer than half the lines of the first)."""
    text = amd_tools.clean_text(text)
    marker = next((line.strip() for line in text.splitlines() if _TRUNCATION.fullmatch(line.strip())), None)
    if marker:
        return marker
    if amd_tools.looks_like_json(text):
        try:
            amd_tools.json_document(text, "output")
        except ToolOutputError as exc:
            return "the JSON stops before its closing brackets" if "cut short" in str(exc) else None
        return None
    blocks = [(number, block) for kind, number, block in amd_tools.text_blocks(text) if kind == "GPU"]
    if len(blocks) >= 2 and _lines(blocks[-1][1]) * 2 < _lines(blocks[0][1]):
        return f"GPU {blocks[-1][0]}'s block stops part-way"
    if blocks and _starts_inside_a_block(text):
        return f"the output starts part-way into the block before GPU {blocks[0][0]}"
    return amd_tools.rocminfo_cut(text) or _cut_last_row(text)


_BLOCK_HEAD = re.compile(r"^[ \t]*(?:GPU|CPU|CORE|NIC|SWITCH)[ \t]*:[ \t]*\d+[ \t]*$", re.MULTILINE)


def _starts_inside_a_block(text: str) -> bool:
    """An amd-smi text whose first block header ('GPU: N', 'CPU: N', ...) comes after indented
    'KEY: value' lines: the paste begins inside the block of a device it does not show."""
    head = _BLOCK_HEAD.search(text)
    before = text[: head.start()] if head else ""
    return any(re.match(r"[ \t]+[A-Z][A-Z0-9_ ]*:", line) for line in before.splitlines())


_ROW_HEAD = re.compile(r"\d+|(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def _cut_last_row(text: str) -> str | None:
    """A table whose last row stops after its first cells ('8' under a row of 13 cells starting
    '7', a PCI address alone under a row of them): the paste was cut in the middle of the table."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    if len(rows) < 2 or len(rows[-2]) < 4 or len(rows[-1]) * 2 >= len(rows[-2]):
        return None
    last, before = rows[-1][0], rows[-2][0]
    if _ROW_HEAD.fullmatch(last) and _ROW_HEAD.fullmatch(before) and last.isdigit() == before.isdigit():
        return f"the table's last row stops after {' '.join(rows[-1])!r}"
    return None


def _lines(block: Mapping[str, Any]) -> int:
    return sum(_lines(value) if isinstance(value, Mapping) else 1 for value in block.values()) + 1


def _merged_amd_facts(
    outputs: Mapping[str, str], errors: ProbeErrors, cut: Mapping[str, str]
) -> tuple[list[AmdGpuFacts], bool]:
    """One fact per GPU from every AMD output: the listing with the most GPUs sets the list (a
    disagreement on the count is said), each GPU's facts are folded from every output that lists
    it, the more trusted output first (`_AMD_PARSERS` order), and outputs that describe
    different products for one GPU are not combined."""
    listings = [
        (name, errors.run(name, partial(parse, outputs[name]), [])) for name, parse in _AMD_PARSERS if name in outputs
    ]
    listings = [(name, listing) for name, listing in listings if listing]
    if not listings:
        return [], False
    base_name, base = max(listings, key=lambda item: len(item[1]))
    paired: list[list[tuple[str, AmdGpuFacts]]] = [[(base_name, f)] for f in base]
    for name, listing in listings:
        if name == base_name:
            continue
        matched = amd_tools.match_facts([slot[0][1].bdf for slot in paired], listing)
        if not any(matched) and name in cut and len(listing) < len(paired) and not any(f.bdf for f in listing):
            matched = [*listing, *[None] * (len(paired) - len(listing))]  # a cut-short listing is the first GPUs
        if not any(matched):
            errors.messages.append(_unpaired(name, listing, base_name))
            continue
        for slot, facts in zip(paired, matched):
            if facts is not None:
                slot.append((name, facts))
        paired += [[(name, f)] for f in listing if f.bdf and not any(f is m for m in matched)]
    errors.messages.extend(_count_disagreements(listings, base_name, len(paired), cut))
    trust = {name: rank for rank, (name, _) in enumerate(_AMD_PARSERS)}
    merged = [_fold(sorted(slot, key=lambda item: trust[item[0]]), errors) for slot in paired]
    errors.messages.extend(_memory_disagreements(paired, trust))
    errors.messages.extend(_incomplete_packages(merged))
    at_least = not any(name not in cut and len(listing) >= len(paired) for name, listing in listings)
    return _modes_from_shared_addresses(merged, at_least), at_least


def _incomplete_packages(facts: list[AmdGpuFacts]) -> list[str]:
    """Packages the outputs list fewer partitions of than their mode has (ROCm/ROCm#4750: 63 of
    64 CPX partitions): each run of partition IDs from 0 is one package."""
    runs: list[list[int]] = []
    for position, f in enumerate(facts):
        if f.partition_id is None or not f.compute_partition:
            continue
        if f.partition_id == 0 or not runs:
            runs.append([])
        runs[-1].append(position)
    problems = []
    for run in runs:
        first = facts[run[0]]
        row = peaks.find_peaks(first.market_name or "", first.arch or "")
        expected = peaks.partition_count(row, first.compute_partition) if row is not None else None
        if row is not None and expected and len(run) < expected:
            problems.append(
                f"GPUs {run[0]}-{run[-1]} are {len(run)} {first.compute_partition} partitions of one {row.product} "
                f"package, which has {expected} in that mode: a partition is missing from the outputs (not "
                "initialised, or hidden); check `dmesg | grep amdgpu` and save the outputs again"
            )
    return problems


def _count_disagreements(
    listings: list[tuple[str, list[AmdGpuFacts]]], base_name: str, described: int, cut: Mapping[str, str]
) -> list[str]:
    """The outputs that list different GPU counts; one cut short ('[output truncated]') listing
    fewer is expected to, and is no disagreement: the count it gives is a lower bound."""
    counts = {name: len(listing) for name, listing in listings if name not in cut or len(listing) >= described}
    if len(set(counts.values())) <= 1:
        return []
    listed = ", ".join(f"{name} {count}" for name, count in counts.items())
    return [
        f"the outputs disagree on the GPU count ({listed}); the node is described with {described}: those "
        f"{base_name} lists and any other output adds. Save every output on the node at one time, for every "
        "GPU (`rocm-validate bundle DIR`)"
    ]


def _unpaired(name: str, listing: list[AmdGpuFacts], base_name: str) -> str:
    if not any(f.bdf for f in listing):
        return (
            f"{name} lists {len(listing)} GPUs without PCI addresses, so they cannot be paired with those of "
            f"{base_name}; {name} was not combined with it"
        )
    shown = ", ".join(dict.fromkeys(f.bdf or "?" for f in listing[:4]))
    return (
        f"{name} lists GPUs at {shown}{', ...' if len(listing) > 4 else ''}, none of which {base_name} lists: "
        f"outputs of different nodes or cards? {name} was not combined with it. Save both on the same node"
    )


def _product_of(facts: AmdGpuFacts) -> str | None:
    who = identity.identify(facts.device_id, facts.market_name, facts.arch, None, facts.subsystem_id)
    return who.product.name if who.product is not None else None


def _fold(slot: list[tuple[str, AmdGpuFacts]], errors: ProbeErrors) -> AmdGpuFacts:
    """One GPU's facts from each output that lists it, most trusted first; an output naming
    another product (or ISA) for it is left out and said so."""
    (first_name, merged), *rest = slot
    for name, facts in rest:
        mine, theirs = _product_of(merged), _product_of(facts)
        arch_clash = merged.arch and facts.arch and not identity.same_silicon(merged.arch, facts.arch)
        if (mine and theirs and mine != theirs) or arch_clash:
            said = f"{theirs or facts.arch}" if theirs or arch_clash else "?"
            errors.messages.append(
                f"{first_name} and {name} describe different GPUs at {merged.bdf or f'GPU {merged.index}'}: "
                f"{mine or merged.arch} and {said}; {name} was not combined with it. Save both on the same node"
            )
            continue
        merged = amd_tools.merge_facts(merged, facts)
    return merged


def _memory_disagreements(paired: list[list[tuple[str, AmdGpuFacts]]], trust: Mapping[str, int]) -> list[str]:
    """Outputs whose memory figures for one GPU differ by more than 10%, once per pair of outputs."""
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for slot in paired:
        sized = sorted(((trust[n], n, f.memory_bytes) for n, f in slot if f.memory_bytes), key=lambda x: x[0])
        for (_, first, kept), (_, other, theirs) in zip(sized, sized[1:]):
            if abs(kept - theirs) > 0.1 * max(kept, theirs):
                found.setdefault((first, other), []).append((kept, theirs))
    return [
        f"{first} and {other} disagree on the memory of {len(pairs)} GPU{'s' if len(pairs) > 1 else ''} "
        f"({pairs[0][0] / 1024**3:.1f} GiB against {pairs[0][1] / 1024**3:.1f} GiB); {first}'s figures are used"
        for (first, other), pairs in found.items()
    ]


def _modes_from_shared_addresses(facts: list[AmdGpuFacts], cut_short: bool = False) -> list[AmdGpuFacts]:
    """The compute mode of GPUs no tool gave one for, and whose CU count is not known either,
    inferred from how many of them a listing puts behind one PCI device (three MI300A partitions
    at 0000:01:00 are TPX). Where the listing was cut short, the last address listed may have
    more partitions past the cut: its GPUs get no mode."""
    counts = Counter(amd_tools.pci_device_address(f.bdf) for f in facts if f.bdf)
    addressed = [f.bdf for f in facts if f.bdf]
    open_address = amd_tools.pci_device_address(addressed[-1]) if cut_short and addressed else None
    result = []
    for f in facts:
        mode = None
        if f.bdf and f.arch and not (f.compute_partition or f.memory_partition or f.compute_units):
            address = amd_tools.pci_device_address(f.bdf)
            if address == open_address:
                result.append(f)
                continue
            mode = partitions.infer_from_shared_address(f.market_name or "", f.arch, counts[address], address)
        result.append(f if mode is None else replace(f, compute_partition=mode.compute, partition_source=mode.source))
    return result


def _tools_only(info: DeviceInfo, sources: tuple[str, ...]) -> DeviceInfo:
    """A device built from tool facts alone: no torch ran, so the software stack stays empty."""
    return replace(
        info,
        torch_version=None,
        runtime_version=None,
        collective_library=None,
        libraries=(),
        scaled_mm=False,
        attention_backends=("math",),
        attention_library=None,
        preferred_blas=None,
        sources=sources,
    )


def _amd_device(amd: AmdGpuFacts, position: int, errors: tuple[str, ...]) -> DeviceInfo:
    """One AMD GPU from the saved outputs; the tools' facts stand where torch's would."""
    as_torch = TorchGpuFacts(
        index=position,
        name=amd.market_name or "",
        major=0,
        minor=0,
        total_memory=0,
        multi_processor_count=0,
        gcn_arch_name=amd.arch
        if amd.arch and "arch" not in amd.derived
        else "unknown",  # torch's stand-in: printed only
    )
    info = build_gpu_info(
        as_torch, StackFacts(backend="rocm", torch_version="", runtime_version=None), {}, amd=amd, errors=errors
    )
    derived = tuple(source for source in info.sources if source.startswith(DERIVED))
    return _tools_only(info, (*(f"saved {source}" for source in amd.source.split("+")), *derived))


def _nvidia_device(gpu: NvidiaGpuFacts, log: NvidiaSmiLog, errors: tuple[str, ...]) -> DeviceInfo:
    """One NVIDIA GPU from `nvidia-smi -q -x`; an architecture of several capabilities leaves the arch unknown."""
    major, minor = gpu.capability or (0, 0)
    as_torch = TorchGpuFacts(
        index=gpu.index,
        name=gpu.name,
        major=major,
        minor=minor,
        total_memory=gpu.memory_bytes or 0,
        multi_processor_count=0,
        pci_bus_id=gpu.pci_bus_id,
        uuid=gpu.uuid,
    )
    nvml = NvmlFacts(log.driver_version, gpu.max_clock_mhz, gpu.max_memory_clock_mhz, gpu.pci_bus_id)
    info = build_gpu_info(
        as_torch, StackFacts(backend="cuda", torch_version="", runtime_version=None), {}, nvml=nvml, errors=errors
    )
    if gpu.capability is None:
        problem = (
            f"nvidia-smi.xml: GPU {gpu.index}: no compute capability for architecture {gpu.architecture or 'unknown'}"
        )
        info = replace(
            info,
            arch="unknown",
            device_key=arch.device_key("cuda", gpu.name, "unknown"),
            fp8_formats=(),
            errors=(*info.errors, problem),
        )
    return _tools_only(info, ("saved nvidia-smi -q -x",))


# --- saving a bundle on a node ---------------------------------------------------------------


@dataclass(frozen=True)
class SavedCommand:
    """What happened to one file of a bundle."""

    file: str
    command: str  # the command whose output was saved, or the last one tried
    status: str  # "saved", "missing" (tool not on PATH), "failed", "timeout"
    seconds: float
    detail: str = ""  # why it failed, each command tried


def save_outputs(
    folder: Path,
    timeout_s: float = 60.0,
    run: Callable[[list[str], float], str] = run_tool,
    env: Mapping[str, str] | None = None,
) -> tuple[SavedCommand, ...]:
    """Run every command of SAVED_OUTPUTS, save what each printed in `folder`, and write the
    manifest (bundle.json). A missing tool, a failure or a timeout is recorded, never raised."""
    folder.mkdir(parents=True, exist_ok=True)
    records = tuple(_save_one(folder, output, timeout_s, run) for output in SAVED_OUTPUTS)
    manifest = bundle_manifest(records, dict(os.environ if env is None else env))
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return records


def _save_one(
    folder: Path, output: SavedOutput, timeout_s: float, run: Callable[[list[str], float], str]
) -> SavedCommand:
    tried: list[str] = []
    started = time.monotonic()
    status, command = "failed", ""
    for argv in output.commands:
        command = " ".join(argv)
        try:
            text = run(list(argv), timeout_s)
        except FileNotFoundError:
            status = "missing"
            tried.append(f"{command}: {argv[0]} not on PATH")
            break
        except subprocess.TimeoutExpired:
            status = "timeout"
            tried.append(f"{command}: no answer in {timeout_s:g} s")
            break
        except Exception as exc:
            tried.append(f"{command}: {one_line(exc)}")
            continue
        (folder / output.file).write_text(text)
        return SavedCommand(output.file, command, "saved", round(time.monotonic() - started, 3), "; ".join(tried))
    return SavedCommand(output.file, command, status, round(time.monotonic() - started, 3), "; ".join(tried))


def bundle_manifest(records: tuple[SavedCommand, ...], env: Mapping[str, str]) -> dict[str, Any]:
    """What a bundle says about itself: the node, the variables in force and each command's fate."""
    rocm = Path(env.get("ROCM_PATH") or "/opt/rocm") / ".info" / "version"
    try:
        rocm_version: str | None = rocm.read_text().strip() or None
    except OSError:
        rocm_version = None
    return {
        "schema": "rocm-validate/bundle/1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "kernel": platform.release(),
        "rocm_version": rocm_version,
        "variables": dict(visibility(env)),
        "outputs": [asdict(record) for record in records],
    }
