"""Why a perf metric regressed, from the evidence recorded around its measurement (see
`PerfRecorder.measure_interleaved`): another process on the GPU, or a loaded host for a
host-side metric, is `contention`; a clock drop that accounts for the loss, or an active thermal
or hardware limit, is `throttling`; a loss with clocks and other processes normal is
`performance`, the stack's own; a step over several GPUs whose telemetry names the GPU its peers
waited for (HELD_BACK_KEY) is that GPU's loss, `hardware`, blamed on it. Pure: it reads the
telemetry dictionary a metric carries.

Seen on an H100 with a second process running GEMMs: every GEMM and copy metric lost 15-20% and
the SM clock read lower too (the two processes shared the power budget), so the process list is
looked at first: a clock drop under contention is the contention's doing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A host-side metric runs on the CPU as much as on the GPU: launches, pinned host copies.
HOST_SIDE_PATTERNS = ("launch.*", "copy.*.pinned.*", "copy.h2d.*", "copy.d2h.*")
# Other work using at least this share of the host's CPUs explains a host-side loss of a GPU run.
HOST_BUSY_SHARE = 0.5
# On the CPU the host's CPUs are the device: as any other process on a GPU is contention, so is
# other work of a quarter of one CPU or more (a busy process's worth; an idle CI VM shows 0.0-0.1).
# '1.0 of 2 busy with other work' passed under the share rule and was blamed on the image.
CPU_DEVICE_BUSY = 0.25
# A clock this much below the baseline's is a real drop (the 3% the gate has always used).
CLOCK_DROP = 0.03
# A clock drop explains a loss when it is at least this share of it (compute-bound kernels
# slow down about in proportion to their clock; a 5% clock dip does not explain a 20% loss).
CLOCK_SHARE_OF_LOSS = 0.5
# Limits that lower clocks below what the power budget of a healthy GPU gives: a power cap alone
# is normal at full load (an H100 running an 8192^3 GEMM sits at its cap), so it is not one.
THERMAL_OR_HARDWARE = frozenset({"hw-slowdown", "sw-thermal", "hw-thermal", "hw-power-brake"})
# A node-wide step's telemetry may name the GPUs the others waited for: {"gpus": [1], "why": "rank 1 on
# GPU 1 (BDF ...) holds the fsdp step back: ..."} (suites/collectives/test_training.py). A loss of the
# step is then theirs, as a clock drop's is throttling: one GPU differs from its peers.
HELD_BACK_KEY = "held_back_by"


def held_back_by(gpus: Sequence[int], why: str) -> dict[str, Any]:
    """The telemetry that blames a step's loss on `gpus`, the GPUs its peers waited for, saying `why`."""
    return {HELD_BACK_KEY: {"gpus": list(gpus), "why": why}}


@dataclass(frozen=True)
class HeldBack:
    """The GPUs a step's peers waited for while it was measured, and the words that name them."""

    gpus: tuple[int, ...]
    why: str


def held_back(telemetry: Mapping[str, Any]) -> HeldBack | None:
    """What a metric's telemetry says held its step back (`held_back_by`), or None."""
    found = telemetry.get(HELD_BACK_KEY) or {}
    if not found:
        return None
    return HeldBack(tuple(int(gpu) for gpu in found.get("gpus") or ()), str(found.get("why")))


@dataclass(frozen=True)
class Attribution:
    """A regression's category and the evidence, as a note to append to its message."""

    category: str
    note: str
    gpus: tuple[int, ...] = ()  # the GPUs the loss is blamed on (HELD_BACK_KEY), none when it is the node's


def is_host_side(name: str) -> bool:
    """Metrics whose speed depends on the host CPU as much as on the GPU."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in HOST_SIDE_PATTERNS)


def gpu_neighbours(telemetry: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The other processes seen on the GPU before or after the measurement (each pid once), and
    why the list is unknown ('' when it was read)."""
    samples = telemetry.get("processes") or {}
    seen: dict[int, dict[str, Any]] = {}
    reasons = []
    for when in ("before", "after"):
        sample = samples.get(when) or {}
        if sample.get("processes") is None:
            reasons.append(sample.get("unavailable") or "not recorded")
            continue
        for process in sample["processes"]:
            seen.setdefault(int(process["pid"]), process)
    known = len(reasons) < 2
    return list(seen.values()), "" if known else reasons[-1]


def _describe(process: Mapping[str, Any]) -> str:
    memory = process.get("memory_bytes")
    size = f" ({memory / 1024**3:.1f} GiB)" if memory else ""
    return f"pid {process['pid']} {process.get('name') or 'unknown'}{size}"


def _host_note(host: Mapping[str, Any], on_cpu: bool = False) -> tuple[str, bool]:
    """'host CPUs: 14.2 of 16 busy with other work' and whether that is a loaded host: other work
    on HOST_BUSY_SHARE of its CPUs, or, measuring on the CPU itself (`on_cpu`), CPU_DEVICE_BUSY."""
    other, cpus = host.get("other_cpus"), host.get("cpus")
    if other is None or not cpus:
        return "", False
    steal = host.get("steal_cpus") or 0.0
    stolen = f", {steal:.1f} taken by the hypervisor" if steal >= 0.1 else ""
    threshold = CPU_DEVICE_BUSY if on_cpu else HOST_BUSY_SHARE * cpus
    return f"host CPUs: {other:.1f} of {cpus} busy with other work{stolen}", other >= threshold


WindowClocks = tuple  # (mean MHz over this window, mean MHz over the baseline's, limits seen in the window)


def _clock(
    telemetry: Mapping[str, Any], baseline_clock: float | None, loss: float, window: WindowClocks | None = None
) -> tuple[str, bool]:
    """'clock 1410 MHz now vs 1755 MHz at baseline (-19.7%), limits active: hw-thermal' and
    whether clocks or limits explain a loss of `loss` (a fraction). The windows' mean clocks
    (rocm_validate.platform.clocks) are used when both are known, else the readings after."""
    after = telemetry.get("after") or {}
    now, then, kind = after.get("clock_mhz"), baseline_clock, "clock"
    slowdowns = list(after.get("slowdowns") or [])
    if window is not None and window[0] and window[1]:
        now, then, kind = window[0], window[1], "mean clock"
        slowdowns = sorted(set(slowdowns) | set(window[2]))
    limits = f"limits active: {', '.join(slowdowns)}" if slowdowns else ""
    limited = bool(set(slowdowns) & THERMAL_OR_HARDWARE)
    if not now or not then:
        return limits, limited
    change = now / then - 1
    note = f"{kind} {now:.0f} MHz now vs {then:.0f} MHz at baseline ({change:+.1%})"
    dropped = change <= -CLOCK_DROP and -change >= CLOCK_SHARE_OF_LOSS * loss
    return note + (f", {limits}" if limits else ""), dropped or limited


def contention(name: str, telemetry: Mapping[str, Any]) -> str:
    """The other work seen around a measurement ('' when none): other processes on the GPU, or,
    for a host-side metric (every metric of a CPU run), other work on half the host's CPUs or
    more. A figure measured beside other work says nothing about the stack or the node."""
    neighbours, _ = gpu_neighbours(telemetry)
    if neighbours:
        return f"other processes used the GPU during the measurement: {', '.join(_describe(p) for p in neighbours)}"
    host_note, host_loaded = _host_note(telemetry.get("host") or {}, bool(telemetry.get("host_bound")))
    host_side = is_host_side(name) or bool(telemetry.get("host_bound"))
    return host_note if host_side and host_loaded else ""


def attribute(
    name: str,
    telemetry: Mapping[str, Any],
    baseline_clock: float | None,
    loss: float,
    window: WindowClocks | None = None,
    per_clock: bool = False,
) -> Attribution:
    """The category of a regression of `loss` (a fraction, 0.2 = 20% worse) of metric `name`,
    and a note ('; ...') with the evidence and what to do. A loss judged per clock cycle
    (`per_clock`) is what is left after the clock is divided out, so the clock cannot explain it."""
    neighbours, unknown = gpu_neighbours(telemetry)
    clock_note, clocks_explain = _clock(telemetry, baseline_clock, loss, window)
    if per_clock:
        clocks_explain = clocks_explain and bool(set((window or (None, None, ()))[2]) & THERMAL_OR_HARDWARE)
    host_note, _ = _host_note(telemetry.get("host") or {})
    host_side = is_host_side(name) or bool(telemetry.get("host_bound"))
    facts = [n for n in (clock_note, host_note if host_side else "") if n]
    evidence = "".join(f"; {fact}" for fact in facts)
    seen = contention(name, telemetry)
    if seen and neighbours:
        return Attribution("contention", f"; contention: {seen}{evidence}; rerun with the GPU to itself")
    if seen:
        clock = f"; {clock_note}" if clock_note else ""
        return Attribution("contention", f"; contention: {seen}{clock}; rerun on an idle host")
    slowed = held_back(telemetry)
    if slowed is not None:
        return Attribution(
            "hardware",
            f"; held back by one GPU: {slowed.why}; the step's loss is that GPU's, not the stack's: drain and triage it",
            slowed.gpus,
        )
    if clocks_explain:
        return Attribution(
            "throttling",
            f"; {clock_note}: the clock drop or the limits explain the loss: throttling (power or thermal), not "
            "software; check cooling, power caps and clock settings",
        )
    if unknown:
        return Attribution("performance", f"{evidence}; other processes on the GPU: unknown ({unknown})")
    return Attribution(
        "performance", f"{evidence}; no other process on the GPU and clocks explain no loss: the stack is slower"
    )
