"""What a training-steps run measures (`StepsPlan`), the rank program's command line, and every
rank's results made into verdicts (pure, torch-free).

The rank program (`python -m rocm_validate.collectives.training`, training.py) runs, in one
process group, the jobs of its plan:

* `parity`: a small Llama decoder sharded over the N ranks and the same decoder on a group of
  one, 5 steps on the same global batch from the same seed: the per-step losses and the final
  parameters must agree, in fp32 with deterministic algorithms within the error model below, in
  bf16 mixed precision within a measured tolerance; and each rank's own gradient contribution
  must equal a peer's computation of the same micro-batch, so a rank that contributes a wrong
  gradient is named.
* `fsdp`: the Llama-3.1-8B-shaped decoder (full width, a few layers) sharded with FSDP2 in bf16
  with fp32 reduction, timed on the group and alone on each rank (a group of one, the same
  per-GPU batch): tokens/s/GPU, model TFLOP/s, peak memory, the scaling efficiency, and how
  long each rank waited in FSDP's all-gathers (the rank the others wait for waits least).
* `fsdp-float8`: the same step with torchao's Float8 training (tensor-wise scaling, the FP8
  all-gather of the weights) in every decoder layer, each layer under torch.compile: the same
  metrics, and its tokens/s/GPU over the `fsdp` step's of the same run (`fp8_speedup`); the
  extended level, GPUs only (skipped, saying so, without torchao or native FP8).
* `ddp`: MLPerf's BERT-L with DDP, timed the same way: samples/s/GPU and scaling efficiency
  (the extended level).
* `lora`: MLPerf llama2_70b_lora's shape (width 8192, GQA 64/8, `layers` layers, a frozen bf16 base,
  peft's LoRA adapters on the attention projections), sharded with FSDP2, one sequence per rank:
  tokens/s/GPU (the extended level; skipped, saying so, where peft is not installed).

Error model of the fp32 parity check. The N-rank step differs from the one-rank step only in the
order of float32 sums over the global batch's tokens (each rank sums its slice, then the
reduction sums the ranks' partial sums; the batch's matrix products block differently). A sum of
n terms in any order errs by at most gamma(n-1) = (n-1)u / (1 - (n-1)u) times the sum of the
terms' magnitudes (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4),
u = 2^-24. Taken relative to the result (the terms of a gradient mostly share a sign per element
at these sizes) and compounded over the steps (SGD: each step's update is linear in its
gradient, and a parameter difference feeds the next gradient about one to one at a small
learning rate), the bound on the relative difference of the losses and of the parameter updates
after S steps is S x n x u with n the global batch's tokens. It is a worst case: the measured
difference is orders of magnitude below it (docs/perf.md, "Training over the node").
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

JOBS = ("parity", "fsdp", "fsdp-float8", "ddp", "lora")
TIMED_JOBS = JOBS[1:]  # the jobs timed on the group and alone (`Throughput`)
PARITY_STEPS = 5
FP32_UNIT_ROUNDOFF = 2.0**-24
# bf16 mixed precision (bf16 parameters and activations, fp32 reduction) against the same on one
# rank: a different split of the batch changes the bf16 roundings of the activations' sums.
# Measured: parameter updates 7.5e-3 apart (relative) on 2 gloo ranks and 7.54e-3 on 2 x H200,
# losses 2.6e-5 and 1.5e-5 (docs/perf.md); 2e-2 leaves 2.6x.
BF16_TOLERANCE = 2e-2
# A rank's own gradient against a peer's computation of the same micro-batch: the same code on the
# same kind of device, so equal to rounding of the float64 projection (the clean runs on 2 gloo
# ranks and on 2 x H200 passed); far below any wrong gradient worth naming (the planted one is 1% off).
CONTRIBUTION_TOLERANCE = 1e-4
# The rank every other rank waits for in the all-gathers holds the step back: its own wait is the
# shortest; more than this fraction of the step below the others' names it.
STRAGGLER_FRACTION = 0.10
PLANT_KINDS = ("grad", "slow")
SCHEMA_ID = "rocm-validate/training-steps/1"
REPORT_SCHEMA: dict[str, object] = {
    "title": "rocm-validate training steps report (python -m rocm_validate.collectives.training --out)",
    "type": "object",
    "required": ["schema", "results", "verdicts", "passed"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "results": {"type": "array", "items": {"type": ["object", "null"]}},
        "verdicts": {"type": "array", "items": {"type": "string"}},
        "passed": {"type": "boolean"},
    },
}


@dataclass(frozen=True)
class Plant:
    """A negative control planted on one rank: 'grad' scales its gradient contribution by `amount`
    (1.01: 1% off); 'slow' delays each of its all-gathers by `amount` milliseconds."""

    kind: str
    rank: int
    amount: float

    def __post_init__(self) -> None:
        if self.kind not in PLANT_KINDS or self.rank < 0 or self.amount <= 0:
            raise ValueError(
                f"plant {self.argument()}: expected KIND:RANK:AMOUNT with KIND one of {', '.join(PLANT_KINDS)} "
                "and a positive amount, e.g. grad:1:1.01 or slow:1:5"
            )

    def argument(self) -> str:
        return f"{self.kind}:{self.rank}:{self.amount:g}"

    @classmethod
    def parse(cls, text: str) -> Plant:
        parts = text.split(":")
        try:
            return cls(parts[0], int(parts[1]), float(parts[2]))
        except (IndexError, ValueError):
            raise ValueError(f"plant {text!r}: expected KIND:RANK:AMOUNT, e.g. grad:1:1.01 or slow:1:5") from None


@dataclass(frozen=True)
class StepsPlan:
    """The jobs to run and their sizes: `scale` full on GPUs (tiny on the CPU), `layers` decoder
    layers, `batch` sequences per rank of `seq_len` tokens, `warmup` and `steps` timed steps."""

    jobs: tuple[str, ...]
    scale: str
    layers: int
    batch: int
    seq_len: int
    bert_batch: int
    warmup: int
    steps: int
    timeout_s: float
    plants: tuple[Plant, ...] = field(default=())

    def arguments(self) -> list[str]:
        words = [
            "--jobs",
            ",".join(self.jobs),
            "--scale",
            self.scale,
            "--layers",
            str(self.layers),
            "--batch",
            str(self.batch),
            "--seq-len",
            str(self.seq_len),
            "--bert-batch",
            str(self.bert_batch),
            "--warmup",
            str(self.warmup),
            "--steps",
            str(self.steps),
            "--timeout",
            f"{self.timeout_s:g}",
        ]
        for plant in self.plants:
            words += ["--plant", plant.argument()]
        return words

    def plant(self, kind: str, rank: int) -> Plant | None:
        return next((p for p in self.plants if p.kind == kind and p.rank == rank), None)


# The standard level runs the parity check and the sharded Llama step: on GPUs two full-width
# decoder layers at batch 2 x 4096 (the perf suite's single-GPU Llama step), 4 warm-up and 8 timed
# steps alone and on the group (with 2 and 5 a cold step alone differed by up to 23% between the two
# H200s of one host). The DDP BERT-L step is at the extended level: at 16 x 512 and 8 steps its
# rounds spread 7-24% on 2 x H200 (the gate refused it as a baseline), so it needs a longer window;
# so are the LoRA step and the Float8 step, whose torch.compile costs a cold compile (the standard level's
# node run is already past its 5 minutes).
STANDARD_JOBS = ("parity", "fsdp")
GPU_STEPS = StepsPlan(
    jobs=STANDARD_JOBS, scale="full", layers=2, batch=2, seq_len=4096, bert_batch=16, warmup=4, steps=8, timeout_s=120.0
)
EXTENDED_GPU_STEPS = StepsPlan(
    jobs=JOBS, scale="full", layers=8, batch=2, seq_len=8192, bert_batch=32, warmup=5, steps=30, timeout_s=300.0
)
CPU_STEPS = StepsPlan(
    jobs=STANDARD_JOBS, scale="tiny", layers=2, batch=2, seq_len=32, bert_batch=2, warmup=1, steps=2, timeout_s=60.0
)


def plan_for(library: str, level: str) -> StepsPlan:
    """The steps of a world at a level: the GPU or CPU sizes, DDP BERT-L, LoRA and Float8 at extended only."""
    if library == "nccl":
        return EXTENDED_GPU_STEPS if level == "extended" else GPU_STEPS
    return replace(CPU_STEPS, jobs=JOBS) if level == "extended" else CPU_STEPS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rocm_validate.collectives.training",
        description="Run the node's training steps (FSDP2 Llama in bf16 and Float8, DDP BERT-L, LoRA, the N-rank vs "
        "one-rank parity check) "
        "as one rank of a torch.distributed world (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from "
        "the environment, as torchrun sets them). Rank 0 gathers every rank's results and writes --out.",
    )
    p.add_argument("--out", help="rank 0 writes the JSON report here (every rank's results and the verdicts)")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--level", choices=("quick", "standard", "extended"), default="standard")
    p.add_argument("--jobs", default=None, help=f"comma-separated, the level's by default: {', '.join(JOBS)}")
    for name in ("scale", "layers", "batch", "seq-len", "bert-batch", "warmup", "steps", "timeout"):
        p.add_argument(f"--{name}", default=None)
    p.add_argument("--plant", action="append", default=[], help="negative control: grad:RANK:FACTOR or slow:RANK:MS")
    return p


def chosen_jobs(text: str, where: str) -> tuple[str, ...]:
    """Comma-separated job names, checked (ValueError naming `where` and the known jobs)."""
    jobs = tuple(j.strip() for j in text.split(",") if j.strip())
    unknown = [j for j in jobs if j not in JOBS]
    if unknown or not jobs:
        raise ValueError(f"{where}: unknown {', '.join(unknown) or 'empty list'}; known: {', '.join(JOBS)}")
    return jobs


def plan_from_arguments(args: argparse.Namespace, gpu: bool) -> StepsPlan:
    base = plan_for("nccl" if gpu else "gloo", args.level)
    jobs = chosen_jobs(args.jobs, "--jobs") if args.jobs else base.jobs

    def whole(name: str, default: int) -> int:
        value = getattr(args, name.replace("-", "_"))
        if value is None:
            return default
        if not str(value).isdigit() or int(value) < 1:
            raise ValueError(f"--{name}={value}: expected a whole number, at least 1")
        return int(value)

    return StepsPlan(
        jobs=jobs,
        scale=args.scale or base.scale,
        layers=whole("layers", base.layers),
        batch=whole("batch", base.batch),
        seq_len=whole("seq-len", base.seq_len),
        bert_batch=whole("bert-batch", base.bert_batch),
        warmup=whole("warmup", base.warmup),
        steps=whole("steps", base.steps),
        timeout_s=float(args.timeout) if args.timeout else base.timeout_s,
        plants=tuple(Plant.parse(p) for p in args.plant),
    )


# ---------------------------------------------------------------------------------------------
# Verdicts from every rank's results (rank r's result is results[r]).


def fp32_bound(tokens: int, steps: int = PARITY_STEPS) -> float:
    """The error model's bound on the relative difference after `steps` steps over `tokens` tokens."""
    return steps * tokens * FP32_UNIT_ROUNDOFF


@dataclass(frozen=True)
class Parity:
    """One precision's parity check over the world: how far the N-rank run is from the one-rank
    run (losses, parameter updates), the allowed difference and why, and the ranks whose own
    gradient differed from a peer's computation of the same micro-batch (`wrong_ranks`, each
    named in `wrong_contributions`)."""

    precision: str
    loss_distance: float
    update_distance: float
    allowed: float
    how: str
    wrong_contributions: tuple[str, ...]
    wrong_ranks: tuple[int, ...] = ()

    @property
    def distance(self) -> float:
        return max(self.loss_distance, self.update_distance)

    @property
    def passed(self) -> bool:
        return self.distance <= self.allowed and not self.wrong_contributions

    def message(self) -> str:
        head = (
            f"{self.precision}: the N-rank step is {self.loss_distance:.3g} from the one-rank step in its losses and "
            f"{self.update_distance:.3g} in its parameter updates (relative), allowed {self.allowed:.3g} ({self.how})"
        )
        return "\n".join([head, *self.wrong_contributions])


def parity(precision: str, results: Sequence[Mapping[str, object]], labels: Sequence[str]) -> Parity:
    """The parity verdict of `precision` ('fp32' or 'bf16') from every rank's `parity` result."""
    parts = [r["parity"][precision] for r in results]  # type: ignore[index]
    world = len(parts)
    loss = max(float(p["loss_distance"]) for p in parts)
    update = max(float(p["update_distance"]) for p in parts)
    tokens = int(parts[0]["tokens"])
    if precision == "fp32":
        allowed, how = fp32_bound(tokens), f"{PARITY_STEPS} steps x {tokens} tokens x u(fp32) = 2^-24, the error model"
    else:
        allowed, how = BF16_TOLERANCE, "bf16 mixed precision: the measured tolerance (docs/perf.md)"
    wrong: dict[int, str] = {}
    for rank, part in enumerate(parts):
        peer = (rank - 1) % world  # rank r-1 computed rank r's micro-batch
        checked = parts[peer]["peer_prints"]
        distance = _relative(part["own_prints"], checked)
        if distance > CONTRIBUTION_TOLERANCE:
            wrong[rank] = (
                f"{labels[rank]} contributed a wrong gradient: {distance:.3g} (relative) from {labels[peer]}'s "
                f"computation of the same micro-batch, allowed {CONTRIBUTION_TOLERANCE:g}"
            )
    return Parity(precision, loss, update, allowed, how, tuple(wrong.values()), tuple(wrong))


def _relative(a: Sequence[float], b: Sequence[float]) -> float:
    diff = sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5
    norm = sum(y * y for y in b) ** 0.5
    return diff / norm if norm else (0.0 if diff == 0 else float("inf"))


@dataclass(frozen=True)
class Straggler:
    """The rank the others waited for in the all-gathers, and the message that names it."""

    rank: int
    message: str


@dataclass(frozen=True)
class Throughput:
    """A timed job over the world: the group's step time, each rank's alone, and the work per step."""

    job: str
    group_s: float  # mean step, the slowest rank's per step
    solo_s: tuple[float, ...]  # each rank's mean step alone (a group of one, the same per-rank batch)
    solo_spread: tuple[float | None, ...]  # each rank's steps alone: IQR / median
    work_per_rank: float  # tokens (fsdp) or samples (ddp) per rank per step
    flops_per_rank: float
    peak_gib: tuple[float | None, ...]
    waits_s: tuple[float | None, ...]  # each rank's all-gather time per step (None: not measured)
    dispersion: float | None
    world: int

    @property
    def per_gpu_rate(self) -> float:
        return self.work_per_rank / self.group_s

    @property
    def solo_rate(self) -> float:
        return self.work_per_rank / statistics.median(self.solo_s)

    @property
    def efficiency(self) -> float:
        """Per-GPU rate on the group over the per-GPU rate alone (1.0: perfect scaling)."""
        return self.per_gpu_rate / self.solo_rate

    @property
    def tflops_per_gpu(self) -> float:
        return self.flops_per_rank / self.group_s / 1e12

    def straggler(self, labels: Sequence[str]) -> Straggler | None:
        """The rank that held the step back, named, or None: the others waited for it in the
        all-gathers, longer than its own wait by more than STRAGGLER_FRACTION of the step."""
        waits = [w for w in self.waits_s if w is not None]
        if len(waits) != self.world or self.world < 2:
            return None
        slow = min(range(self.world), key=lambda r: waits[r])
        others = statistics.median(w for r, w in enumerate(waits) if r != slow)
        if others - waits[slow] <= STRAGGLER_FRACTION * self.group_s:
            return None
        return Straggler(
            slow,
            f"{labels[slow]} holds the {self.job} step back: the other ranks waited {others * 1e3:.1f} ms per step in "
            f"FSDP's all-gathers, it waited {waits[slow] * 1e3:.1f} ms (step {self.group_s * 1e3:.1f} ms; more than "
            f"{STRAGGLER_FRACTION:.0%} of the step apart names the rank the others wait for)",
        )


def throughput(job: str, results: Sequence[Mapping[str, object]]) -> Throughput:
    parts = [r[job] for r in results]
    per_step = [max(steps) for steps in zip(*(p["group_s"] for p in parts), strict=True)]  # type: ignore[index]
    return Throughput(
        job=job,
        group_s=statistics.fmean(per_step),
        solo_s=tuple(statistics.fmean(p["solo_s"]) for p in parts),  # type: ignore[index]
        solo_spread=tuple(_spread(p["solo_s"]) for p in parts),  # type: ignore[index]
        work_per_rank=float(parts[0]["work_per_rank"]),  # type: ignore[index]
        flops_per_rank=float(parts[0]["flops_per_rank"]),  # type: ignore[index]
        peak_gib=tuple(p.get("peak_gib") for p in parts),  # type: ignore[attr-defined]
        waits_s=tuple(p.get("wait_s") for p in parts),  # type: ignore[attr-defined]
        dispersion=_spread(per_step),
        world=len(parts),
    )


def _spread(seconds: Sequence[float]) -> float | None:
    """IQR / median of the steps' seconds (None below 2 steps)."""
    if len(seconds) < 2:
        return None
    quartiles = statistics.quantiles(seconds, n=4, method="inclusive")
    return (quartiles[2] - quartiles[0]) / statistics.median(seconds)


@dataclass(frozen=True)
class Speedup:
    """How many times the candidate job's tokens/s/GPU the default job's is, in one run, on the
    same layers, sequence length and per-GPU batch; its noise, the two step times' spreads combined."""

    candidate: str
    default: str
    value: float
    dispersion: float | None


def speedup(candidate: str, default: str, results: Sequence[Mapping[str, object]]) -> Speedup | None:
    """`candidate`'s step rate over `default`'s, or None unless both ran (not skipped) on the
    same shape: a ratio of different shapes says nothing about either."""
    fast_part, base_part = results[0].get(candidate), results[0].get(default)
    if not isinstance(fast_part, Mapping) or not isinstance(base_part, Mapping):
        return None
    if "skipped" in fast_part or "skipped" in base_part:
        return None
    if any(fast_part.get(key) != base_part.get(key) for key in ("layers", "seq_len", "batch")):
        return None
    fast, base = throughput(candidate, results), throughput(default, results)
    a, b = fast.dispersion, base.dispersion
    dispersion = math.hypot(a, b) if a is not None and b is not None else None
    return Speedup(candidate, default, fast.per_gpu_rate / base.per_gpu_rate, dispersion)
