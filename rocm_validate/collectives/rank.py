"""The program each rank of a collectives world runs: `python -m rocm_validate.collectives`.

It reads its place in the world from the environment torchrun sets (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and joins with torch's own env:// rendezvous, so the same
program runs under this project's launcher (one host, from pytest) and under
`torchrun --nnodes N --nproc-per-node G` across nodes. Every collective of the plan is called
once and its result checked exactly on this rank, then timed; then every pair of ranks copies
one buffer peer to peer, one pair at a time.

Each rank publishes its progress (the step it is entering) and finally its result as JSON in
the world's TCPStore (torch's own key-value store: no pickle), under a prefix unique to the run.
This project's launcher reads them there to name a rank that hangs or dies (every rank exits 0
once its result is published). With --out (the torchrun way), every rank reads them all and
exits with the world's verdict, and rank 0 writes the report with every rank's failures.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

import torch
import torch.distributed as dist

from rocm_validate.collectives import payloads, training_payloads
from rocm_validate.collectives.formats import TRAINING_COLLECTIVES, split
from rocm_validate.collectives.outcome import REPORT_SCHEMA, summarize
from rocm_validate.collectives.plan import Plan, parser, plan_from_arguments
from rocm_validate.results.sizes import size_label
from rocm_validate.text import clip

RUN_ID_VARIABLE = "ROCM_VALIDATE_RUN_ID"  # set by the launcher; torchrun's TORCHELASTIC_RUN_ID otherwise
EXIT_USAGE = 2
_HANG_S = 24 * 3600


def store_prefix(env: Mapping[str, str]) -> str:
    """Keys of one run (and one torchrun restart) in the shared store."""
    run = env.get(RUN_ID_VARIABLE) or env.get("TORCHELASTIC_RUN_ID") or "local"
    return f"rocm_validate/collectives/{run}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/"


def progress_key(prefix: str, rank: int) -> str:
    return f"{prefix}progress/{rank}"


def result_key(prefix: str, rank: int) -> str:
    return f"{prefix}result/{rank}"


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {clip(text, 400)}"


class Rank:
    """One rank's run of a plan: its place in the world, its device, and its reporting channel."""

    def __init__(self, plan: Plan, rank: int, world: int, device: torch.device, store: Any, prefix: str) -> None:
        self.plan, self.rank, self.world, self.device = plan, rank, world, device
        self.store, self.prefix = store, prefix
        self.at: str | None = None
        self.sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def enter(self, label: str) -> None:
        """Publish the step this rank is entering, so a launcher can name a rank that stops."""
        self.at = label
        self.store.set(progress_key(self.prefix, self.rank), label)

    def barrier(self) -> None:
        if self.device.type == "cuda":
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    def planted(self, step: str, when: str) -> bool:
        """Act out a negative-control fault planted for this rank at `step`; True when the result
        must be corrupted ('after'), after hanging or exiting for the others ('before')."""
        fault = self.plan.fault(step, self.rank)
        if fault is None:
            return False
        if when == "before" and fault.kind == "exit":
            sys.stdout.flush()
            os._exit(17)
        if when == "before" and fault.kind == "hang":
            time.sleep(_HANG_S)
        return when == "after" and fault.kind == "corrupt"

    def timed(self, run: Callable[[], Any], agree: Callable[[int], int]) -> tuple[list[float], int]:
        """Seconds per call in each timed round, after the warmup calls, and the calls per round:
        enough to fill the plan's round time, as the warm-up calls measured it, agreed by every
        rank that calls `run` (`agree`: the largest of theirs), so all make the same calls."""
        start = time.perf_counter()
        for _ in range(self.plan.warmup):
            run()
        self.sync()
        per_call = (time.perf_counter() - start) / self.plan.warmup if self.plan.warmup else 0.0
        iters = agree(self.plan.calls_per_round(per_call)) if self.plan.round_s > 0 else self.plan.iters
        rounds = []
        for _ in range(self.plan.rounds):
            start = time.perf_counter()
            for _ in range(iters):
                run()
            self.sync()
            rounds.append((time.perf_counter() - start) / iters)
        return rounds, iters

    def agree_world(self, calls: int) -> int:
        """The largest of every rank's calls per round (a MAX all_reduce of one number)."""
        chosen = torch.tensor([calls], dtype=torch.int64, device=self.device)
        dist.all_reduce(chosen, op=dist.ReduceOp.MAX)
        return int(chosen.item())

    def agree_pair(self, src: int, dst: int) -> Callable[[int], int]:
        """For a copy src -> dst: the sender's calls per round, sent to the receiver."""

        def agree(calls: int) -> int:
            chosen = torch.tensor([calls], dtype=torch.int64, device=self.device)
            if self.rank == src:
                dist.send(chosen, dst)
            else:
                dist.recv(chosen, src)
            return int(chosen.item())

        return agree

    def step(self, op: str, nbytes: int) -> dict[str, Any]:
        """One collective at one size: called once and checked (bit for bit, or a training
        reduction within its error bound), then timed on zeros."""
        training = op in TRAINING_COLLECTIVES
        element_bytes = split(op)[1].nbytes
        count = payloads.element_count(nbytes, self.world, element_bytes)
        self.enter(f"{op} {size_label(count * element_bytes)}")
        chosen = training_payloads if training else payloads
        send, recv = chosen.buffers(op, self.rank, self.world, count, self.device)
        self.planted(op, "before")
        chosen.call(op, send, recv)
        self.sync()
        ratio = None
        if training:
            if self.planted(op, "after"):
                training_payloads.corrupt(op, self.rank, self.world, count, recv)
            problem, ratio = training_payloads.check(op, self.rank, self.world, count, recv)
        else:
            if self.planted(op, "after"):
                recv.view(-1)[::7] += 1
            problem = payloads.check(op, self.rank, self.world, count, recv)
        send.zero_()
        recv.zero_()
        self.barrier()
        seconds, iters = self.timed(lambda: chosen.call(op, send, recv), self.agree_world)
        return {
            "op": op,
            "bytes": count * element_bytes,
            "mismatch": problem,
            "error_ratio": ratio,
            "seconds": seconds,
            "calls_per_round": iters,
        }

    def copy(self, src: int, dst: int) -> dict[str, Any] | None:
        """One peer-to-peer copy src -> dst, checked on dst; the other ranks only wait their turn."""
        self.barrier()
        if self.rank not in (src, dst):
            return None
        count = max(1, self.plan.p2p_bytes // payloads.ELEMENT_BYTES)
        self.enter(f"p2p {src}->{dst} {size_label(count * payloads.ELEMENT_BYTES)}")
        if self.rank == src:
            buffer = payloads.pattern(src, count, self.device)
            run: Callable[[], Any] = lambda: dist.send(buffer, dst)  # noqa: E731
        else:
            buffer = torch.empty(count, device=self.device)
            run = lambda: dist.recv(buffer, src)  # noqa: E731
        self.planted("p2p", "before")
        run()
        self.sync()
        problem = None
        if self.rank == dst:
            if self.planted("p2p", "after"):
                buffer[::7] += 1
            problem = payloads.mismatch(buffer, payloads.pattern(src, count, self.device))
        seconds, iters = self.timed(run, self.agree_pair(src, dst))
        return {
            "src": src,
            "dst": dst,
            "bytes": count * payloads.ELEMENT_BYTES,
            "mismatch": problem,
            "seconds": seconds,
            "calls_per_round": iters,
        }

    def run(self, facts: dict[str, Any]) -> dict[str, Any]:
        """The whole plan; an exception (a peer that timed out or went away) stops this rank's run
        and is recorded with the step it happened in."""
        result: dict[str, Any] = {**facts, "steps": [], "p2p": [], "error": None, "at": None}
        try:
            for op in self.plan.ops:
                for nbytes in self.plan.sizes_of(op):
                    result["steps"].append(self.step(op, nbytes))
            if self.plan.p2p_bytes and self.world > 1:
                for src in range(self.world):
                    for dst in range(src + 1, self.world):
                        copied = self.copy(src, dst)
                        if copied is not None:
                            result["p2p"].append(copied)
            self.enter("done")
        except Exception as exc:
            result["error"], result["at"] = one_line(exc), self.at
        return result


def world_from_env(env: Mapping[str, str], module: str = "rocm_validate.collectives") -> tuple[int, int, int, str, int]:
    """RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; ValueError naming the missing
    ones and how to start the rank program `module` with them."""
    missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
    if missing:
        raise ValueError(
            f"{', '.join(missing)} not set: start the ranks with torchrun (torchrun --nproc-per-node N -m "
            f"{module}) or from pytest (pytest --rocm-suite=collectives)"
        )
    rank = int(env["RANK"])
    return rank, int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", rank)), env["MASTER_ADDR"], int(env["MASTER_PORT"])


def rank_device(library: str, local_rank: int) -> torch.device:
    if library == "gloo":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("--backend nccl needs a GPU, and torch sees none (torch.cuda.is_available() is False)")
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise ValueError(f"local rank {local_rank} needs GPU {local_rank}, but this process sees {count}")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def gather(store: Any, prefix: str, world: int, timeout_s: float) -> tuple[list[dict[str, Any] | None], dict[int, str]]:
    """Every rank's published result (rank 0, for its report); a rank with none by the deadline
    is None, with a note naming the step it was last seen in."""
    deadline = time.monotonic() + timeout_s
    results: list[dict[str, Any] | None] = []
    notes = {}
    for rank in range(world):
        try:
            store.wait([result_key(prefix, rank)], timedelta(seconds=max(0.1, deadline - time.monotonic())))
            results.append(json.loads(store.get(result_key(prefix, rank))))
        except Exception:
            results.append(None)
            seen = store.get(progress_key(prefix, rank)).decode() if store.check([progress_key(prefix, rank)]) else None
            notes[rank] = f"no result within {timeout_s:g} s" + (
                f"; last seen entering {seen}" if seen else "; never started"
            )
    return results, notes


def _rank_label(result: Mapping[str, Any] | None, rank: int) -> str:
    if not result:
        return f"rank {rank}"
    where = ", ".join(str(v) for v in (result.get("host"), result.get("device"), result.get("uuid")) if v)
    return f"rank {rank} ({where})"


def verdict(out: str, rank: int, store: Any, prefix: str, world: int, library: str, timeout_s: float) -> int:
    """With --out (torchrun): every rank reads every rank's results and exits with the world's
    verdict, 0 or 1, so torchrun fails (or passes) the job on every node alike instead of leaving
    the nodes whose ranks passed waiting at its exit barrier; rank 0 writes the report and prints
    the table."""
    from pathlib import Path

    from rocm_validate.results import jsonfile

    results, notes = gather(store, prefix, world, timeout_s)
    outcome = summarize(results, [_rank_label(r, i) for i, r in enumerate(results)], library, notes)
    if rank == 0:
        jsonfile.write_json(Path(out), outcome.to_dict(), REPORT_SCHEMA)
        print("\n".join(outcome.table()))
        print(f"rocm-validate collectives: {'passed' if outcome.passed else 'FAILED'}; wrote {out}")
    return 0 if outcome.passed else 1


class _Timed(Protocol):
    @property
    def timeout_s(self) -> float: ...


PlanT = TypeVar("PlanT", bound=_Timed)


@dataclass(frozen=True)
class Member(Generic[PlanT]):
    """This process's place in a world it joined: its rank, the library, its device, its plan and
    the world's TCPStore."""

    rank: int
    world: int
    local_rank: int
    library: str
    device: torch.device
    plan: PlanT
    store: Any  # torch.distributed.TCPStore


def join(
    program: str,
    backend: str,
    plan_for: Callable[[bool], PlanT],
    env: Mapping[str, str],
    *,
    bind_device: bool,
    module: str = "rocm_validate.collectives",
) -> Member[PlanT] | None:
    """Join the world torchrun (or this project's launcher) described in `env`, as `program`
    ('collectives', 'training steps'); `plan_for(nccl)` parses the program's plan. None, with the
    reason on stderr, when the environment, the plan or the rendezvous is wrong (exit EXIT_USAGE).
    `bind_device` hands the rank's GPU to the process group (eager NCCL communicators); `module` is
    the program's, for the error that says how to start it."""
    try:
        rank, world, local_rank, address, port = world_from_env(env, module)
        library = backend if backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
        plan = plan_for(library == "nccl")
        device = rank_device(library, local_rank)
    except ValueError as exc:
        print(f"rocm-validate {program}: {exc}", file=sys.stderr)
        return None
    timeout = timedelta(seconds=plan.timeout_s)
    try:
        dist.init_process_group(
            library,
            init_method="env://",
            rank=rank,
            world_size=world,
            timeout=timeout,
            device_id=device if bind_device and device.type == "cuda" else None,
        )
        store = dist.TCPStore(address, port, is_master=False, timeout=timeout)
    except Exception as exc:
        print(
            f"rocm-validate {program}: rank {rank} of {world} could not join the rendezvous at {address}:{port} within "
            f"{plan.timeout_s:g} s ({one_line(exc)}). Check MASTER_ADDR / MASTER_PORT (torchrun: --rdzv-endpoint), "
            f"that the port is open between the nodes, and that all {world} ranks were started",
            file=sys.stderr,
        )
        return None
    return Member(rank, world, local_rank, library, device, plan, store)


def leave(member: Member[Any], result: Mapping[str, Any], prefix: str, code: Callable[[], int]) -> int:
    """Publish this rank's result, then its exit status (`code()`, the world's verdict where this
    rank writes it); a rank whose group broke exits at once, since a broken group can hang in
    teardown and its result is already published."""
    member.store.set(result_key(prefix, member.rank), json.dumps(result))
    status = code()
    sys.stdout.flush()
    if result["error"]:
        os._exit(status)
    dist.destroy_process_group()
    return status


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    env = os.environ
    member = join("collectives", args.backend, lambda nccl: plan_from_arguments(args, nccl), env, bind_device=False)
    if member is None:
        return EXIT_USAGE
    prefix, device = store_prefix(env), member.device
    facts = {
        "rank": member.rank,
        "world": member.world,
        "local_rank": member.local_rank,
        "host": socket.gethostname(),
        "device": str(device),
        "backend": member.library,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts["device_name"] = str(props.name)
        if getattr(props, "uuid", None) is not None:
            facts["uuid"] = str(props.uuid)
    result = Rank(member.plan, member.rank, member.world, device, member.store, prefix).run(facts)

    def world_verdict() -> int:
        return verdict(args.out, member.rank, member.store, prefix, member.world, member.library, member.plan.timeout_s)

    return leave(member, result, prefix, world_verdict if args.out else lambda: 0)
