"""Every rank's results of a collectives run, made into one verdict (pure, torch-free).

A step (one collective at one size) is timed on every rank in rounds; a round's time is the mean
over ranks of its seconds per call (nccl-tests' default `-a 1`), the step's time is the mean of
its rounds, and the spread of the rounds (IQR / median) is its noise, as the perf gate reads it.
A step fails when any rank's data differs (that rank is named) or a rank did not report it; a
training reduction (bf16 / fp16) also carries its margin, the largest error / bound on any rank. A
rank that died, hung or stopped on an error is a problem of the whole group, named first.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rocm_validate.collectives.busbw import algbw_gbps, bus_factor, size_label

SCHEMA_ID = "rocm-validate/collectives/1"
_STEP = {
    "type": "object",
    "required": ["op", "nbytes", "world", "seconds", "mismatches", "missing"],
    "properties": {
        "op": {"type": "string"},
        "nbytes": {"type": "integer"},
        "world": {"type": "integer"},
        "seconds": {"type": "array", "items": {"type": "number"}},
        "busbw_gbps": {"type": ["number", "null"]},
        "algbw_gbps": {"type": ["number", "null"]},
        "error_ratio": {"type": ["number", "null"]},
        "mismatches": {"type": "array", "items": {"type": "string"}},
        "missing": {"type": "array", "items": {"type": "string"}},
    },
}
REPORT_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate collectives report",
    "type": "object",
    "required": ["schema", "backend", "ranks", "steps", "pairs", "problems", "passed"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "backend": {"type": "string"},
        "ranks": {"type": "array", "items": {"type": "object"}},
        "steps": {"type": "array", "items": _STEP},
        "pairs": {"type": "array", "items": {"type": "object", "required": ["src", "dst", "nbytes", "seconds"]}},
        "problems": {"type": "array", "items": {"type": "string"}},
        "passed": {"type": "boolean"},
    },
}


# How the launcher names a rank that could not join the group (the rendezvous: its address, its
# port, the other ranks); `group_failure` reads it to call that a configuration problem.
JOIN_FAILED = "could not join the group"
JOIN_FIX = (
    "check that every rank starts and reaches the rendezvous (MASTER_ADDR / MASTER_PORT, a free port, a "
    "firewall between the nodes); each rank's log is named in the failure"
)


def group_failure(problems: Sequence[str]) -> tuple[str, str | None]:
    """The triage category of a group that did not complete, from its first problem (the rank that
    ended it), and what to fix: a rank that could not join is the run's configuration, never the
    stack's numerics, and so is one stuck in startup while another could not join (the group never
    formed); a rank that hung or never started is a timeout; one that died, a crash."""
    first = problems[0] if problems else ""
    never_formed = "in startup" in first and "died with" not in first and any(JOIN_FAILED in p for p in problems)
    if JOIN_FAILED in first or never_formed:
        return "configuration", JOIN_FIX
    if "hung in" in first or "did not start within" in first:
        return "timeout", None
    return "crash", None


def spread(seconds: Sequence[float]) -> float | None:
    """IQR / median of timed rounds: the relative noise the perf gate reads (None below 2 rounds)."""
    if len(seconds) < 2:
        return None
    quartiles = statistics.quantiles(seconds, n=4, method="inclusive")
    return (quartiles[2] - quartiles[0]) / statistics.median(seconds)


def _lists(data: dict[str, Any]) -> dict[str, Any]:
    """A dataclass's fields as JSON has them: tuples become lists."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v) and v > 0]
    return math.fsum(finite) / len(finite) if finite else None


@dataclass(frozen=True)
class StepOutcome:
    """One collective at one message size, over the whole world."""

    op: str
    nbytes: int
    world: int
    seconds: tuple[float, ...]  # per round: seconds per call, mean over ranks
    mismatches: tuple[str, ...] = ()  # 'rank 1 (GPU 3): 12 / 1024 elements differ ...'
    missing: tuple[str, ...] = ()  # ranks that did not report this step
    error_ratio: float | None = None  # a training reduction's largest error / bound over the ranks
    wrong_ranks: tuple[int, ...] = ()  # the ranks whose result differed (each named in `mismatches`)

    @property
    def label(self) -> str:
        return f"{self.op} {size_label(self.nbytes)}"

    @property
    def time_s(self) -> float | None:
        return _mean(self.seconds)

    @property
    def algbw(self) -> float | None:
        return None if self.time_s is None else algbw_gbps(self.nbytes, self.time_s)

    @property
    def busbw(self) -> float | None:
        return None if self.algbw is None else self.algbw * bus_factor(self.op, self.world)

    @property
    def dispersion(self) -> float | None:
        return spread(self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return {**_lists(asdict(self)), "busbw_gbps": self.busbw, "algbw_gbps": self.algbw}


@dataclass(frozen=True)
class PairOutcome:
    """A peer-to-peer copy from rank `src` to rank `dst`."""

    src: int
    dst: int
    nbytes: int
    seconds: tuple[float, ...]  # per round: seconds per copy, the slower of the two sides
    mismatch: str | None = None
    missing: bool = False

    @property
    def bandwidth(self) -> float | None:
        time = _mean(self.seconds)
        return None if time is None else algbw_gbps(self.nbytes, time)

    @property
    def dispersion(self) -> float | None:
        return spread(self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return {**_lists(asdict(self)), "bandwidth_gbps": self.bandwidth}


@dataclass(frozen=True)
class WorldOutcome:
    """A collectives run: its ranks, every step and pair, and what stopped the group, if anything."""

    library: str  # the collective library: 'nccl' (RCCL on ROCm) or 'gloo' (torch.distributed's backend)
    labels: tuple[str, ...]  # each rank's name in messages
    steps: tuple[StepOutcome, ...]
    pairs: tuple[PairOutcome, ...]
    problems: tuple[str, ...] = ()  # ranks that died, hung or stopped on an error
    ranks: tuple[Mapping[str, Any], ...] = ()  # each rank's own facts (host, device, BDF)

    @property
    def world(self) -> int:
        return len(self.labels)

    @property
    def passed(self) -> bool:
        return (
            not self.problems
            and not any(s.mismatches or s.missing for s in self.steps)
            and not any(p.mismatch or p.missing for p in self.pairs)
        )

    def steps_of(self, op: str) -> list[StepOutcome]:
        return sorted((s for s in self.steps if s.op == op), key=lambda s: s.nbytes)

    def data_failures(self, op: str) -> list[str]:
        """Every rank whose `op` result differed, per size."""
        return [f"{step.label}: {m}" for step in self.steps_of(op) for m in step.mismatches]

    def wrong_ranks(self, op: str) -> tuple[int, ...]:
        """The ranks whose `op` result differed at any size."""
        return tuple(sorted({rank for step in self.steps_of(op) for rank in step.wrong_ranks}))

    def incomplete(self, op: str, planned: int) -> str | None:
        """Why `op` was not measured at all `planned` sizes on every rank (the group's problems
        first, naming the rank), or None."""
        steps = self.steps_of(op)
        missing = [f"{s.label}: no result from {', '.join(s.missing)}" for s in steps if s.missing]
        if len(steps) == planned and not missing:
            return None
        reasons = list(self.problems) or missing or [f"{op} ran at {len(steps)} of {planned} sizes"]
        return f"{op} was not measured on every rank: " + "; ".join(reasons)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_ID,
            "backend": self.library,  # torch.distributed's name for it
            "ranks": [dict(r) for r in self.ranks] or [{"label": label} for label in self.labels],
            "steps": [s.to_dict() for s in self.steps],
            "pairs": [p.to_dict() for p in self.pairs],
            "problems": list(self.problems),
            "passed": self.passed,
        }

    def table(self) -> list[str]:
        """Bus bandwidth per collective and size, then the pairs, as text."""
        lines = [f"{'collective':<22}{'size':>8}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  data"]
        for step in sorted(self.steps, key=lambda s: (s.op, s.nbytes)):
            time = "-" if step.time_s is None else f"{step.time_s * 1e6:.1f}"
            data = "ok" if not (step.mismatches or step.missing) else "WRONG" if step.mismatches else "missing"
            if step.error_ratio is not None:
                data += f" (error / bound {step.error_ratio:.3g})"
            lines.append(
                f"{step.op:<22}{size_label(step.nbytes):>8}{time:>12}{step.algbw or 0:>12.3f}{step.busbw or 0:>12.3f}  {data}"
            )
        for pair in self.pairs:
            data = "ok" if not (pair.mismatch or pair.missing) else "WRONG" if pair.mismatch else "missing"
            lines.append(
                f"p2p {pair.src} -> {pair.dst:<13}{size_label(pair.nbytes):>8}{'':>12}{pair.bandwidth or 0:>12.3f}{'':>12}  {data}"
            )
        return lines + [f"problem: {p}" for p in self.problems]


def _step_outcome(
    op: str, nbytes: int, reports: Sequence[tuple[str, Mapping[str, Any] | None]], world: int
) -> StepOutcome:
    rounds: list[list[float]] = []
    mismatches, missing, ratios, wrong = [], [], [], []
    for rank, (label, step) in enumerate(reports):
        if step is None:
            missing.append(label)
            continue
        if step.get("mismatch"):
            mismatches.append(f"{label}: {step['mismatch']}")
            wrong.append(rank)
        if step.get("error_ratio") is not None:
            ratios.append(float(step["error_ratio"]))
        for i, seconds in enumerate(step.get("seconds") or []):
            while len(rounds) <= i:
                rounds.append([])
            rounds[i].append(float(seconds))
    per_round = tuple(sum(r) / len(r) for r in rounds if r)
    ratio = max(ratios) if ratios else None
    return StepOutcome(op, nbytes, world, per_round, tuple(mismatches), tuple(missing), ratio, tuple(wrong))


def summarize(
    results: Sequence[Mapping[str, Any] | None],
    labels: Sequence[str],
    library: str,
    notes: Mapping[int, str] | None = None,
) -> WorldOutcome:
    """One verdict from each rank's result (None for a rank that gave none). `notes` say what
    happened to a rank ('died with exit status 17 in all_reduce 4KiB'), the rank that caused the
    group to end first; then the ranks that stopped on an error (a peer that timed out)."""
    notes = dict(notes or {})
    world = len(labels)
    problems = [f"{labels[rank]}: {note}" for rank, note in notes.items()]  # in the order given: culprits first
    for rank, result in enumerate(results):
        if rank in notes:
            continue
        if result is None:
            problems.append(f"{labels[rank]}: gave no result")
        elif result.get("error"):
            where = f" at {result['at']}" if result.get("at") else ""
            problems.append(f"{labels[rank]}: stopped{where}: {result['error']}")
    keys: list[tuple[str, int]] = []
    for result in results:
        for step in (result or {}).get("steps", []):
            if (step["op"], step["bytes"]) not in keys:
                keys.append((step["op"], step["bytes"]))
    steps = []
    for op, nbytes in keys:
        reports = [
            (labels[r], next((s for s in (res or {}).get("steps", []) if (s["op"], s["bytes"]) == (op, nbytes)), None))
            for r, res in enumerate(results)
        ]
        steps.append(_step_outcome(op, nbytes, reports, world))
    facts = tuple(
        {k: v for k, v in (r or {"rank": i}).items() if k not in ("steps", "p2p")} for i, r in enumerate(results)
    )
    return WorldOutcome(library, tuple(labels), tuple(steps), _pairs(results), tuple(problems), facts)


def suspects(pairs: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """The ranks failing pairs point at: the ranks in every one of them (a GPU whose links are all
    slow), else every rank in any of them."""
    if not pairs:
        return ()
    common = set.intersection(*(set(pair) for pair in pairs))
    return tuple(sorted(common or {rank for pair in pairs for rank in pair}))


def _pairs(results: Sequence[Mapping[str, Any] | None]) -> tuple[PairOutcome, ...]:
    """Each pair from both sides: the slower side's rounds, the receiver's data check."""
    sides: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
    for result in results:
        for copy in (result or {}).get("p2p", []):
            sides.setdefault((copy["src"], copy["dst"]), []).append(copy)
    pairs = []
    for (src, dst), found in sorted(sides.items()):
        rounds = zip(*(c.get("seconds") or [] for c in found))
        seconds = tuple(max(r) for r in rounds)
        mismatch = next((c["mismatch"] for c in found if c.get("mismatch")), None)
        pairs.append(PairOutcome(src, dst, int(found[0]["bytes"]), seconds, mismatch, missing=len(found) < 2))
    return tuple(pairs)
