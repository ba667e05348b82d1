"""What a collectives run measures (`Plan`), the world it runs on (`WorldSpec`), and the
command line of the rank program that carries the plan to every rank. Pure.

How the world is chosen: on GPUs, one rank per selected GPU (`--rocm-device=all` or a list;
one GPU is not a group, so the suite skips saying so). On the CPU, the CPU is "several ranks on
one host": `--rocm-cpu-ranks` gloo ranks (default 2), so CI runs the same suite at world size 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from rocm_validate.collectives.busbw import EVERY_COLLECTIVE
from rocm_validate.collectives.formats import TRAINING_COLLECTIVES
from rocm_validate.results.sizes import parse_size, size_label

FAULT_KINDS = ("corrupt", "hang", "exit")
DEFAULT_CPU_RANKS = 2
DEFAULT_TIMEOUT_S = {"gpu": 60.0, "cpu": 20.0}


@dataclass(frozen=True)
class Fault:
    """A planted fault, for the negative controls: on `rank`, at `step` (a collective or 'p2p'),
    'corrupt' the result after the call, 'hang' before it, or 'exit' the process before it."""

    step: str
    rank: int
    kind: str

    def __post_init__(self) -> None:
        if self.step not in (*EVERY_COLLECTIVE, "p2p") or self.kind not in FAULT_KINDS or self.rank < 0:
            raise ValueError(
                f"fault {self.step}:{self.rank}:{self.kind}: expected STEP:RANK:KIND with STEP one of "
                f"{', '.join(EVERY_COLLECTIVE)}, p2p and KIND one of {', '.join(FAULT_KINDS)}"
            )

    def argument(self) -> str:
        return f"{self.step}:{self.rank}:{self.kind}"

    @classmethod
    def parse(cls, text: str) -> Fault:
        parts = text.split(":")
        if len(parts) != 3 or not parts[1].isdigit():
            raise ValueError(f"fault {text!r}: expected STEP:RANK:KIND, e.g. all_reduce:1:corrupt")
        return cls(parts[0], int(parts[1]), parts[2])


@dataclass(frozen=True)
class Plan:
    """The collectives and sizes to run, how long to time them, and how long a rank may wait.
    The training collectives (bf16 / fp16 reductions, FP8 all-gathers) run at `training_sizes`."""

    sizes: tuple[int, ...]
    warmup: int
    iters: int  # calls per timed round (at least)
    rounds: int  # timed rounds: their spread is the measurement's noise
    p2p_bytes: int  # 0: no peer-to-peer copies
    timeout_s: float
    ops: tuple[str, ...] = EVERY_COLLECTIVE
    faults: tuple[Fault, ...] = field(default=())
    training_sizes: tuple[int, ...] = ()
    round_s: float = 0.0  # a timed round lasts at least this long (calls_per_round); 0: `iters` calls

    def calls_per_round(self, per_call_s: float) -> int:
        """Calls in each timed round of a collective whose warm-up calls took `per_call_s` each:
        `iters`, or as many as fill `round_s`, at most MAX_CALLS_PER_ROUND. A round of a few
        milliseconds (10 calls of a 256 MiB all_to_all on NVLink: 5 ms) moves by 10-30% with the
        link's and the clocks' short stalls; a round of 25 ms averages them."""
        if self.round_s <= 0 or not per_call_s > 0:
            return self.iters
        return max(self.iters, min(MAX_CALLS_PER_ROUND, math.ceil(self.round_s / per_call_s)))

    def arguments(self) -> list[str]:
        """The rank program's command line for this plan."""
        words = [
            "--ops",
            ",".join(self.ops),
            "--sizes",
            ",".join(size_label(s) for s in self.sizes),
            "--training-sizes",
            ",".join(size_label(s) for s in self.training_sizes),
            "--warmup",
            str(self.warmup),
            "--iters",
            str(self.iters),
            "--rounds",
            str(self.rounds),
            "--round-s",
            f"{self.round_s:g}",
            "--p2p-size",
            size_label(self.p2p_bytes),
            "--timeout",
            f"{self.timeout_s:g}",
        ]
        for fault in self.faults:
            words += ["--fault", fault.argument()]
        return words

    def sizes_of(self, op: str) -> tuple[int, ...]:
        """The message sizes collective `op` runs at."""
        return self.training_sizes if op in TRAINING_COLLECTIVES else self.sizes

    def fault(self, step: str, rank: int) -> Fault | None:
        return next((f for f in self.faults if f.step == step and f.rank == rank), None)


MIB = 1024**2
MAX_CALLS_PER_ROUND = 1000
GPU_PLAN = Plan(
    sizes=(MIB, 16 * MIB, 256 * MIB, 1024 * MIB),
    warmup=5,
    iters=10,
    rounds=5,
    round_s=0.025,
    p2p_bytes=256 * MIB,
    timeout_s=DEFAULT_TIMEOUT_S["gpu"],
    training_sizes=(16 * MIB, 256 * MIB),
)
CPU_PLAN = Plan(
    sizes=(4096, 64 * 1024, MIB),
    warmup=1,
    iters=3,
    rounds=3,
    p2p_bytes=64 * 1024,
    timeout_s=DEFAULT_TIMEOUT_S["cpu"],
    training_sizes=(4096, 64 * 1024),
)
# The extended level runs the training collectives at every size of the float32 ones: the
# standard level keeps two (a latency-bound one and one that gates the link) for its time budget.
EXTENDED_LEVEL = "extended"


# Every pair copies once per round: n(n-1)/2 pairs grow fast (2016 for 64 CPX partitions), so a
# world larger than a full SPX node copies smaller buffers to keep the suite within minutes.
P2P_FULL_WORLD = 8
P2P_LARGE_WORLD_BYTES = 32 * MIB


def plan_for(library: str, world: int, level: str = "standard") -> Plan:
    """The plan of a world: the GPU plan for nccl (smaller peer-to-peer copies beyond 8 ranks), the
    CPU plan for gloo; at the extended level, the training collectives at every size."""
    base = CPU_PLAN if library != "nccl" else GPU_PLAN
    if level == EXTENDED_LEVEL:
        base = replace(base, training_sizes=base.sizes)
    if library != "nccl" or world <= P2P_FULL_WORLD:
        return base
    return replace(base, p2p_bytes=P2P_LARGE_WORLD_BYTES)


def parser() -> argparse.ArgumentParser:
    """The rank program's options (`python -m rocm_validate.collectives --help`)."""
    p = argparse.ArgumentParser(
        prog="python -m rocm_validate.collectives",
        description="Run the collectives suite as one rank of a torch.distributed world (RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the environment, as torchrun sets them). Rank 0 "
        "gathers every rank's results and writes --out.",
    )
    p.add_argument("--out", help="rank 0 writes the JSON report here (every rank's results and failures)")
    p.add_argument(
        "--backend",
        choices=("auto", "nccl", "gloo"),
        default="auto",
        help="the collective library (torch.distributed's backend); auto: nccl (RCCL on ROCm) when a GPU is visible, else gloo",
    )
    p.add_argument("--ops", default=",".join(EVERY_COLLECTIVE), help="comma-separated collectives")
    p.add_argument("--sizes", default=None, help="message sizes, e.g. 1MiB,256MiB (default: the GPU or CPU plan's)")
    p.add_argument(
        "--training-sizes",
        default=None,
        help=f"message sizes of the training collectives ({', '.join(TRAINING_COLLECTIVES)}; default: the plan's)",
    )
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--iters", type=int, default=None, help="calls per timed round")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds")
    p.add_argument(
        "--round-s",
        type=float,
        default=None,
        help="least seconds per timed round (more calls per round); 0: --iters calls",
    )
    p.add_argument("--p2p-size", default=None, help="bytes per peer-to-peer copy (0: none)")
    p.add_argument(
        "--timeout", type=float, default=None, help="seconds a rank waits for its peers (and the rendezvous)"
    )
    p.add_argument("--fault", action="append", default=[], help="negative control: STEP:RANK:corrupt|hang|exit")
    return p


def plan_from_arguments(args: argparse.Namespace, gpu: bool) -> Plan:
    """The plan a rank runs: the GPU or CPU defaults, with the options given; ValueError on a bad one."""
    base = GPU_PLAN if gpu else CPU_PLAN
    ops = tuple(op.strip() for op in args.ops.split(",") if op.strip())
    unknown = [op for op in ops if op not in EVERY_COLLECTIVE]
    if unknown or not ops:
        raise ValueError(f"--ops: unknown {', '.join(unknown) or 'empty list'}; known: {', '.join(EVERY_COLLECTIVE)}")
    counts = {"warmup": args.warmup, "iters": args.iters, "rounds": args.rounds}
    bad = [
        f"--{name}={value}"
        for name, value in counts.items()
        if value is not None and value < (0 if name == "warmup" else 1)
    ]
    if bad:
        raise ValueError(f"{', '.join(bad)}: expected a whole number (at least 1 timed round of 1 call)")
    if args.round_s is not None and not (math.isfinite(args.round_s) and 0 <= args.round_s <= 10):
        raise ValueError(f"--round-s={args.round_s}: expected seconds from 0 to 10")
    return Plan(
        sizes=_sizes(args.sizes) if args.sizes else base.sizes,
        training_sizes=base.training_sizes if args.training_sizes is None else _sizes(args.training_sizes),
        warmup=base.warmup if args.warmup is None else args.warmup,
        iters=base.iters if args.iters is None else args.iters,
        rounds=base.rounds if args.rounds is None else args.rounds,
        round_s=base.round_s if args.round_s is None else args.round_s,
        p2p_bytes=base.p2p_bytes if args.p2p_size is None else parse_size(args.p2p_size),
        timeout_s=base.timeout_s if args.timeout is None else args.timeout,
        ops=ops,
        faults=tuple(Fault.parse(f) for f in args.fault),
    )


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(parse_size(s) for s in text.split(",") if s.strip())


@dataclass(frozen=True)
class WorldSpec:
    """The ranks of a collectives run on this host: rank r runs on the r-th device."""

    library: str  # the collective library: 'nccl' (RCCL on ROCm) or 'gloo'
    subjects: tuple[str, ...]  # each rank's device: 'GPU 3', or 'rank 1' on the CPU
    labels: tuple[str, ...]  # each rank as messages name it: 'rank 1 on GPU 3 (BDF 0000:c1:00.0)'
    visibility: tuple[tuple[str, str], ...] = ()  # set in every rank: the selected GPUs, in rank order
    gpus: tuple[int, ...] = ()  # each rank's GPU index, as the run selected it (none on the CPU)

    @property
    def size(self) -> int:
        return len(self.subjects)

    def gpus_of(self, ranks: Iterable[int]) -> tuple[int, ...]:
        """The GPU indices `ranks` run on, as a failure blames them (categorize.fail_as); none on the CPU."""
        return tuple(sorted({self.gpus[r] for r in ranks})) if self.gpus else ()

    def name(self, rank: int) -> str:
        """The rank's device in a metric name: 'gpu3', 'rank1'."""
        return self.subjects[rank].lower().replace(" ", "")


def world_skip_reason(gpu_labels: Sequence[str], cpu: bool) -> str | None:
    """Why the selected devices make no group (need vs found), or None."""
    if cpu or len(gpu_labels) >= 2:
        return None
    found = f"1 ({gpu_labels[0]})" if gpu_labels else "none"
    return (
        f"needs two or more GPUs for collectives, found {found}; select several with --rocm-device=all "
        f"or a list such as --rocm-device=0,1"
    )


def cpu_world(ranks: int) -> WorldSpec:
    return WorldSpec(
        "gloo", tuple(f"rank {r}" for r in range(ranks)), tuple(f"rank {r} on the CPU" for r in range(ranks))
    )


def gpu_world(gpus: Sequence[tuple[int, str]], visibility: dict[str, str]) -> WorldSpec:
    """Rank r on the r-th selected GPU (the visibility lists them in rank order and rank r takes
    device LOCAL_RANK = r); `gpus` are (index, 'GPU 3 (BDF ...)') pairs."""
    return WorldSpec(
        "nccl",
        tuple(f"GPU {index}" for index, _ in gpus),
        tuple(f"rank {r} on {label}" for r, (_, label) in enumerate(gpus)),
        tuple(sorted(visibility.items())),
        tuple(index for index, _ in gpus),
    )
