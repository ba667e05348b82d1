"""Floors: the minimum acceptable figure of a metric on a SKU, so a node with no recorded
baseline is gated from its first run (as RVS and AMD's acceptance docs gate an MI300X, and as
DCGM sets per-SKU targets at about 0.75x of measured values).

The shipped table (`shipped_floor`) holds, per product of the datasheet table
(`rocm_validate.platform.peaks`), a floor for each metric where a public acceptance figure or a
defensible rule exists, every entry with its source:

* MI300X / MI325X: RVS's bf16 (552 TFLOP/s) and FP8 (1215 TFLOP/s) GEMM figures and AMD's
  BabelStream copy acceptance (4177 GB/s);
* other AMD parts: the share of the datasheet peak those MI300X figures represent, applied to
  the part's own peak;
* H100 SXM and H200 SXM: 0.75x every throughput measured here (the committed baselines), the DCGM
  rule;
* other NVIDIA parts: 0.75x the share of the datasheet peak the H100 SXM reached here, applied
  to the part's own peak;
* the interconnect (`INTERCONNECT`): collectives at the sizes the gate gates (256 MiB and up) and
  peer-to-peer copies, per world size: AMD's published RCCL all_reduce and TransferBench p2p
  acceptance figures for MI300X-class nodes, and 0.75x what the lent 2 x H200 measured (the
  DCGM rule) for the H200 and H100 SXM, which share its NVLink 4 fabric;
* lower-is-better metrics get a ceiling instead (`Floor.better == "lower"`): peak memory may be
  at most 1 / 0.75 of what was measured here.

A compute partition (CPX, ...) gets its share of the compute floors and no memory floor, as its
datasheet peaks (`peaks.peak_for`). Users add or override floors with `--rocm-floors=DIR`: files
named `<device-key>.json` with the baseline files' schema (`baselines.BASELINES_SCHEMA`).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rocm_validate.errors import BaselineError, JsonFileError
from rocm_validate.perf.baselines import BASELINES_SCHEMA
from rocm_validate.perf.gate import metric_families
from rocm_validate.platform import peaks
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.results import jsonfile

# Metric families the suites record (each has a band in the gate's rules); a user floor for any
# other name is a typo.
FAMILIES = metric_families()


@dataclass(frozen=True)
class Floor:
    """The least a higher-is-better metric may measure, or the most a lower-is-better one may (a
    ceiling: peak memory), and why."""

    value: float
    unit: str
    source: str
    better: str = "higher"

    @property
    def kind(self) -> str:
        return "floor" if self.better == "higher" else "ceiling"


_RVS = "ROCm Validation Suite, rvs/conf/MI300X"
_ACCEPTANCE = "AMD MI300X system acceptance (ROCm/system-acceptance-docs docs/gpus/mi300x.md)"
_MI300X_FIGURES = {  # metric kind -> (figure, unit, source), for the MI300X's datasheet peaks
    "bf16": (552.0, "TFLOP/s", f"{_RVS} level-3 bf16 GEMM target"),
    "fp16": (552.0, "TFLOP/s", f"{_RVS} level-3 bf16 GEMM target (fp16 has the same datasheet rate)"),
    "fp32": (552.0 / 1307.4 * 163.4, "TFLOP/s", f"{_RVS} bf16 GEMM target's share of the bf16 peak, of the fp32 peak"),
    "fp8": (1215.0, "TFLOP/s", f"{_RVS} gst_single.conf FP8 GEMM target (hipBLASLt)"),
    "memory": (4177.285, "GB/s", f"{_ACCEPTANCE}: BabelStream copy"),
}
_MI300X = peaks.find_peaks("AMD Instinct MI300X", "gfx942")

# Throughputs measured on the lent GPUs (the committed baselines, torch 2.11 + CUDA 13.0); the
# floor is MEASURED_SHARE of each. Host-side transfers (pinned copies) depend on the host, not
# the SKU, and get none.
MEASURED_SHARE = 0.75
MEASURED: dict[str, tuple[str, dict[str, tuple[float, str]]]] = {
    "NVIDIA H100 SXM": (
        "the lent H100 80GB HBM3 (baselines/nvidia-h100-80gb-hbm3-sm90.json)",
        {
            "copy.device.2048mib": (3025.0, "GB/s"),
            "gemm.bf16.24576x4096x1024": (636.8, "TFLOP/s"),
            "gemm.bf16.8192x14336x4096": (691.0, "TFLOP/s"),
            "gemm.bf16.8192x8192x8192": (688.1, "TFLOP/s"),
            "gemm.fp16.24576x4096x1024": (613.7, "TFLOP/s"),
            "gemm.fp16.8192x14336x4096": (664.5, "TFLOP/s"),
            "gemm.fp16.8192x8192x8192": (657.3, "TFLOP/s"),
            "gemm.fp32.24576x4096x1024": (50.5, "TFLOP/s"),
            "gemm.fp32.8192x14336x4096": (51.41, "TFLOP/s"),
            "gemm.fp32.8192x8192x8192": (51.67, "TFLOP/s"),
            "gemm.fp8.24576x4096x1024": (1013.0, "TFLOP/s"),
            "gemm.fp8.8192x14336x4096": (1208.0, "TFLOP/s"),
            "gemm.fp8.8192x8192x8192": (1242.0, "TFLOP/s"),
            "sdpa.backward.bert-large.48x16x512x64": (250.9, "TFLOP/s"),
            "sdpa.backward.llama-8b.8x32x4096x128": (459.5, "TFLOP/s"),
            "sdpa.forward.bert-large.48x16x512x64": (379.5, "TFLOP/s"),
            "sdpa.forward.llama-8b.8x32x4096x128": (525.4, "TFLOP/s"),
            "train.bert-large.compiled.model_tflops": (376.6, "TFLOP/s"),
            "train.bert-large.compiled.samples_per_s": (341.0, "samples/s"),
            "train.bert-large.eager.model_tflops": (284.7, "TFLOP/s"),
            "train.bert-large.eager.samples_per_s": (257.8, "samples/s"),
            "train.llama-3.1-8b-2l.eager.model_tflops": (401.1, "TFLOP/s"),
            "train.llama-3.1-8b-2l.eager.tokens_per_s": (64980.0, "tokens/s"),
            # FP8 training steps: the project's eager FP8 linears, and under torch.compile the
            # compiled bf16 step and torchao's float8 recipes (torchao 0.17.0).
            "train.llama-3.1-8b-2l.fp8.model_tflops": (346.2, "TFLOP/s"),
            "train.llama-3.1-8b-2l.fp8.tokens_per_s": (56100.0, "tokens/s"),
            "train.llama-3.1-8b-2l.compiled.model_tflops": (467.4, "TFLOP/s"),
            "train.llama-3.1-8b-2l.compiled.tokens_per_s": (75720.0, "tokens/s"),
            "train.llama-3.1-8b-2l.torchao-tensorwise.model_tflops": (510.8, "TFLOP/s"),
            "train.llama-3.1-8b-2l.torchao-tensorwise.tokens_per_s": (82760.0, "tokens/s"),
            "train.llama-3.1-8b-2l.torchao-rowwise.model_tflops": (478.4, "TFLOP/s"),
            "train.llama-3.1-8b-2l.torchao-rowwise.tokens_per_s": (77510.0, "tokens/s"),
            "train.llama-3.1-8b-2l.torchao-rowwise_with_gw_hp.model_tflops": (486.4, "TFLOP/s"),
            "train.llama-3.1-8b-2l.torchao-rowwise_with_gw_hp.tokens_per_s": (78820.0, "tokens/s"),
        },
    ),
    "NVIDIA H200 SXM": (
        "the lent H200 (baselines/nvidia-h200-sm90.json)",
        {
            "copy.device.2048mib": (4273.0, "GB/s"),
            "gemm.bf16.24576x4096x1024": (612.8, "TFLOP/s"),
            "gemm.bf16.8192x14336x4096": (664.0, "TFLOP/s"),
            "gemm.bf16.8192x8192x8192": (659.1, "TFLOP/s"),
            "gemm.fp16.24576x4096x1024": (591.6, "TFLOP/s"),
            "gemm.fp16.8192x14336x4096": (643.2, "TFLOP/s"),
            "gemm.fp16.8192x8192x8192": (635.4, "TFLOP/s"),
            "gemm.fp32.24576x4096x1024": (50.41, "TFLOP/s"),
            "gemm.fp32.8192x14336x4096": (50.81, "TFLOP/s"),
            "gemm.fp32.8192x8192x8192": (51.04, "TFLOP/s"),
            "gemm.fp8.24576x4096x1024": (981.2, "TFLOP/s"),
            "gemm.fp8.8192x14336x4096": (1171.0, "TFLOP/s"),
            "gemm.fp8.8192x8192x8192": (1211.0, "TFLOP/s"),
            "sdpa.backward.bert-large.48x16x512x64": (280.6, "TFLOP/s"),
            "sdpa.backward.llama-8b.8x32x4096x128": (455.7, "TFLOP/s"),
            "sdpa.forward.bert-large.48x16x512x64": (363.6, "TFLOP/s"),
            "sdpa.forward.llama-8b.8x32x4096x128": (521.1, "TFLOP/s"),
            "train.bert-large.compiled.model_tflops": (393.1, "TFLOP/s"),
            "train.bert-large.compiled.samples_per_s": (356.0, "samples/s"),
            "train.bert-large.eager.model_tflops": (309.5, "TFLOP/s"),
            "train.bert-large.eager.samples_per_s": (280.2, "samples/s"),
            "train.llama-3.1-8b-2l.eager.model_tflops": (432.8, "TFLOP/s"),
            "train.llama-3.1-8b-2l.eager.tokens_per_s": (70120.0, "tokens/s"),
            "train.llama-3.1-8b-2l.fp8.model_tflops": (394.6, "TFLOP/s"),
            "train.llama-3.1-8b-2l.fp8.tokens_per_s": (63930.0, "tokens/s"),
        },
    ),
}

# Peak memory measured here (GiB, the committed baselines; the same on H100 and H200: one
# allocator, one model). Its ceiling is the DCGM rule mirrored: at most 1 / MEASURED_SHARE of it,
# which a math-kernel attention fallback (materialized attention) exceeds and a new allocator
# release does not.
MEASURED_MEMORY: dict[str, tuple[str, dict[str, float]]] = {
    product: (
        where,
        {
            "train.bert-large.eager.peak_memory": 35.47,
            "train.bert-large.compiled.peak_memory": 30.4,
            "train.llama-3.1-8b-2l.eager.peak_memory": 34.22,
            "train.llama-3.1-8b-2l.fp8.peak_memory": 33.35,
            **extra,
        },
    )
    for product, where, extra in (
        (
            "NVIDIA H100 SXM",
            "the lent H100 80GB HBM3 (baselines/nvidia-h100-80gb-hbm3-sm90.json)",
            {
                "train.llama-3.1-8b-2l.compiled.peak_memory": 27.22,
                "train.llama-3.1-8b-2l.torchao-tensorwise.peak_memory": 25.72,
                "train.llama-3.1-8b-2l.torchao-rowwise.peak_memory": 25.72,
                "train.llama-3.1-8b-2l.torchao-rowwise_with_gw_hp.peak_memory": 26.41,
            },
        ),
        ("NVIDIA H200 SXM", "the lent H200 (baselines/nvidia-h200-sm90.json)", {}),
    )
}

# The interconnect, per product: (metric pattern, floor, source). The world size is in the name
# (busbw over 2 GPUs and over 8 differ), and only the sizes the gate gates are floored: below
# 256 MiB bus bandwidth is paced by latency and the library's protocol choice, and moved by up to
# 54% between runs on 2 x H200 (docs/perf.md), so no floor holds there.
_H200X2 = "the lent 2 x H200 over NVLink 4 (NV18; baselines/nvidia-h200-sm90.json, docs/measurements/node-x2-nvidia-h200-sm90.json)"
_H200X2_BUSBW = {  # GB/s, the committed baseline (median of four runs)
    "collective.all_reduce.2ranks.256mib": 293.9,
    "collective.all_reduce.2ranks.1gib": 325.9,
    "collective.all_gather.2ranks.256mib": 239.6,
    "collective.all_gather.2ranks.1gib": 266.4,
    "collective.reduce_scatter.2ranks.256mib": 232.6,
    "collective.reduce_scatter.2ranks.1gib": 271.5,
    "collective.all_to_all.2ranks.256mib": 274.9,
    "collective.all_to_all.2ranks.1gib": 328.1,
    "collective.broadcast.2ranks.256mib": 354.0,
    "collective.broadcast.2ranks.1gib": 365.6,
    "p2p.*.256mib": 352.1,
    # As training calls them, 256 MiB (the standard level's gated size), median of three runs
    # (docs/measurements/collectives-training-2xh200-2026-11-28.json)
    "collective.all_reduce_bf16.2ranks.256mib": 298.8,
    "collective.all_reduce_fp16.2ranks.256mib": 299.0,
    "collective.reduce_scatter_bf16.2ranks.256mib": 227.5,
    "collective.reduce_scatter_fp16.2ranks.256mib": 227.7,
    "collective.all_gather_fp8e4m3.2ranks.256mib": 241.9,
    "collective.all_gather_fp8e5m2.2ranks.256mib": 242.5,
}
_SYSTEM_ACCEPTANCE = "AMD system acceptance (ROCm/system-acceptance-docs docs/gpus/{part}.md)"
_RCCL_AT_8GB = (
    "0.75 x {figure:g} GB/s, the all_reduce_perf bus bandwidth at 8 GB that {source} asks of {gpus} GPUs; "
    "0.75 (the DCGM margin) because the suite measures 1 GiB, where no AMD figure is published"
)


def _amd_interconnect(part: str, gpus: int, all_reduce: float, p2p: float | None) -> list[tuple[str, float, str]]:
    source = _SYSTEM_ACCEPTANCE.format(part=part)
    rows = [
        (
            f"collective.all_reduce.{gpus}ranks.1gib",
            round(MEASURED_SHARE * all_reduce, 1),
            _RCCL_AT_8GB.format(figure=all_reduce, source=source, gpus=gpus),
        )
    ]
    if p2p is not None:
        rows.append(("p2p.*.256mib", p2p, f"{source}: TransferBench p2p, one way, >= {p2p:g} GB/s per GPU pair"))
    return rows


_NVLINK4 = [
    (
        name,
        round(MEASURED_SHARE * value, 1),
        f"{MEASURED_SHARE:g} x {value:g} GB/s measured on {_H200X2}, the DCGM rule",
    )
    for name, value in _H200X2_BUSBW.items()
]
INTERCONNECT: dict[str, list[tuple[str, float, str]]] = {
    "AMD Instinct MI300X": _amd_interconnect("mi300x", 8, 304.0, 33.9),
    "AMD Instinct MI325X": _amd_interconnect("mi325x", 8, 304.0, 33.9),
    "AMD Instinct MI355X": _amd_interconnect("mi355x", 8, 304.0, None),
    "AMD Instinct MI350X": _amd_interconnect("mi350x", 8, 304.0, None),
    "AMD Instinct MI300A": _amd_interconnect("mi300a", 4, 230.0, 80.0),
    "NVIDIA H200 SXM": _NVLINK4,
    # The H100 SXM has the same 18 NVLink 4 links and NVSwitch; no 2 x H100 figures are committed yet.
    "NVIDIA H100 SXM": [(n, v, s + " (the H100 SXM's fabric too)") for n, v, s in _NVLINK4],
}

# The metrics the peak-derived rules cover: the square GEMM of each dtype and the device copy.
_PEAK_METRICS = {
    "gemm.bf16.8192x8192x8192": "bf16",
    "gemm.fp16.8192x8192x8192": "fp16",
    "gemm.fp32.8192x8192x8192": "fp32",
    "gemm.fp8.8192x8192x8192": "fp8",
    "copy.device.2048mib": "memory",
}
_H100 = peaks.find_peaks("NVIDIA H100 80GB HBM3", "sm_90")


def _known_peak(row: peaks.DevicePeaks | None, kind: str) -> float:
    """A peak of the rows the shipped floors derive from (the table always has them)."""
    value = None if row is None else row.value(kind)
    if value is None:
        raise LookupError(f"the peaks table has no {kind} peak for a row the shipped floors derive from")
    return value


def _amd_floor(row: peaks.DevicePeaks, kind: str, peak: float) -> Floor:
    figure, unit, source = _MI300X_FIGURES[kind]
    same_part = row.product == "AMD Instinct MI300X" or (row.product == "AMD Instinct MI325X" and kind != "memory")
    if same_part:  # the figure itself, or a partition's share of it
        return Floor(round(figure * peak / _known_peak(_MI300X, kind), 1), unit, source)
    share = figure / _known_peak(_MI300X, kind)
    return Floor(
        round(share * peak, 1), unit, f"{share:.1%} of the datasheet peak: the share of the MI300X peak of {source}"
    )


def _nvidia_floor(kind: str, metric: str, peak: float) -> Floor:
    value, unit = MEASURED["NVIDIA H100 SXM"][1][metric]
    share = MEASURED_SHARE * value / _known_peak(_H100, kind)
    return Floor(
        round(share * peak, 1),
        unit,
        f"{share:.1%} of the datasheet peak: {MEASURED_SHARE:g} x the share of its peak the H100 SXM reached here",
    )


def shipped_floor(device: DeviceInfo, metric: str) -> Floor | None:
    """The shipped table's floor (or ceiling) of `metric` on `device`, or None where it has none."""
    row = peaks.row_for(device)
    if row is None:
        return None
    whole_package = (device.compute_partition or "spx").lower() in ("spx", "n/a", "")
    if whole_package:
        for pattern, value, source in INTERCONNECT.get(row.product, ()):
            if fnmatch.fnmatchcase(metric, pattern):
                return Floor(value, "GB/s", source)
    if row.product in MEASURED_MEMORY and whole_package and metric in MEASURED_MEMORY[row.product][1]:
        where, memory = MEASURED_MEMORY[row.product]
        return Floor(
            round(memory[metric] / MEASURED_SHARE, 2),
            "GiB",
            f"{memory[metric]:g} GiB measured on {where} / {MEASURED_SHARE:g}, the DCGM rule mirrored for a ceiling",
            better="lower",
        )
    if row.product in MEASURED and whole_package:
        where, values = MEASURED[row.product]
        if metric in values:
            value, unit = values[metric]
            return Floor(
                round(MEASURED_SHARE * value, 1),
                unit,
                f"{MEASURED_SHARE:g} x {value:g} {unit} measured on {where}, the DCGM rule",
            )
    kind = _PEAK_METRICS.get(metric)
    peak = peaks.peak_for(device, kind) if kind else None
    if kind is None or peak is None:
        return None
    return _amd_floor(row, kind, peak) if row.arch.startswith("gfx") else _nvidia_floor(kind, metric, peak)


def read_floor_file(path: Path, device_key: str) -> dict[str, Floor]:
    """A user's floors for one device key (`--rocm-floors`), in the baselines' schema: an entry
    with `"better": "lower"` is a ceiling. Raises BaselineError naming the file and the entry: a
    schema break, or a floor for a metric no suite records."""
    fix = "Fix or remove the file, or point --rocm-floors elsewhere"
    try:
        data = jsonfile.read_json(path, {**BASELINES_SCHEMA, "title": "rocm-validate floors"}, fix=fix)
    except JsonFileError as exc:
        raise BaselineError(str(exc)) from None
    if data["device_key"] != device_key:
        raise BaselineError(
            f"{path} holds floors for device key {data['device_key']!r}, but its name says {device_key!r}. {fix}"
        )
    floors = {}
    for name, entry in data["metrics"].items():
        problem = _entry_problem(name)
        if problem:
            raise BaselineError(f"{path}: floor {name!r} {problem}. {fix}")
        source = str((entry.get("provenance") or {}).get("source") or f"{path}")
        floors[name] = Floor(float(entry["value"]), str(entry["unit"]), source, str(entry["better"]))
    return floors


def _with_closest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=CLOSE)
    return f"{name} (closest: {close[0]})" if close else name


def near_misses(unused: Iterable[str], wanted: Iterable[str]) -> list[str]:
    """The names of `unused` (entries no metric of the run is named by) that are a near miss of
    a name of `wanted` (metrics that found no entry), each with the one it is closest to: a typo
    that leaves both ungated, where an entry of a metric not measured here is no near miss."""
    names = sorted(set(wanted))
    return [
        _with_closest(n, names) for n in sorted(unused) if difflib.get_close_matches(n, names, n=1, cutoff=NEAR_MISS)
    ]


def _entry_problem(name: str) -> str | None:
    family = name.split(".", 1)[0]
    if family not in FAMILIES or not re.fullmatch(r"[a-z0-9][a-z0-9_.+-]*\.[a-z0-9_.+-]+", name):
        return f"names no metric the suites record (metric names start with one of {', '.join(FAMILIES)})"
    return None


CLOSE = 0.8  # difflib's similarity from which a name is shown as the closest of another
# ... and from which an unused entry is taken for a typo of a metric that found none: above
# 'copy.device.2048mib' vs 'copy.device.16mib' (0.83), below one changed digit of a GEMM shape (0.96)
NEAR_MISS = 0.9


class FloorTable:
    """The floors a run gates with: the user's for this device key first, then the shipped table."""

    def __init__(self, device: DeviceInfo, user_folder: Path | None) -> None:
        self.device = device
        keys = (device.device_key, *device.key_aliases)  # an older key's file serves until the device's own exists
        key = next((k for k in keys if user_folder is not None and (user_folder / f"{k}.json").exists()), keys[0])
        self.user_file = None if user_folder is None else user_folder / f"{key}.json"
        self._user = read_floor_file(self.user_file, key) if self.user_file and self.user_file.exists() else {}

    def floor(self, metric: str) -> Floor | None:
        return self._user.get(metric) or shipped_floor(self.device, metric)

    def unmatched(self, recorded: Iterable[str]) -> list[str]:
        """The user's floors no metric of `recorded` is named by: each gated nothing, with the
        recorded name it is closest to where one is close ('gemm.bf16.8192x8192x8193 (closest:
        gemm.bf16.8192x8192x8192)')."""
        names = sorted(set(recorded))
        return [_with_closest(name, names) for name in sorted(set(self._user) - set(names))]

    def describe(self) -> str:
        """'floors: 2 from <file>, then the shipped table for NVIDIA H100 SXM' for the header."""
        row = peaks.row_for(self.device)
        shipped = f"the shipped table for {row.product}" if row else "no shipped floors for this device"
        if self._user:
            return f"floors: {len(self._user)} from {self.user_file}, then {shipped}"
        return f"floors: {shipped}"
