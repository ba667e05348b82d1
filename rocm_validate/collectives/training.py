"""`python -m rocm_validate.collectives.training`: one rank of the node's training steps (steps.py
says what they are). It joins the world as the collectives' rank program does (torch's env://
rendezvous: this project's launcher on one host, or torchrun across nodes), publishes its
progress and result in the world's TCPStore, and with --out every rank reads every result and
exits with the world's verdict, rank 0 writing the report.
"""

from __future__ import annotations

import gc
import os
import socket
import time
from collections.abc import Callable
from typing import Any

# Deterministic cuBLAS for the fp32 parity check: set before the first CUDA call.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.distributed as dist

from rocm_validate.collectives import steps as verdicts
from rocm_validate.collectives.rank import (
    EXIT_USAGE,
    gather,
    join,
    leave,
    one_line,
    progress_key,
    store_prefix,
)
from rocm_validate.collectives.steps import PARITY_STEPS, StepsPlan, parser, plan_from_arguments
from rocm_validate.core.requirements import fp8_recipe_skip_reason, library_skip_reason
from rocm_validate.errors import LibraryMissing
from rocm_validate.platform import devices
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads import fp8_recipes, sharded
from rocm_validate.workloads.models import causal_batch

GIB = 1024**3
PARITY_LAYERS, PARITY_BATCH, PARITY_SEQ = 2, 2, 32
LORA_BATCH = 1  # MLPerf llama2_70b_lora trains one sequence per GPU


class TrainingRank:
    """One rank's run of a steps plan."""

    def __init__(self, plan: StepsPlan, rank: int, world: int, device: torch.device, store: Any, prefix: str) -> None:
        self.plan, self.rank, self.world, self.device = plan, rank, world, device
        self.store, self.prefix = store, prefix
        self.at: str | None = None
        self.phase_s: dict[str, float] = {}  # each phase's wall seconds on this rank, to see where the time goes
        self._since = time.perf_counter()
        self.gpu = device.type == "cuda"
        self.group = dist.group.WORLD
        self.alone = sharded.world_of_one()

    def enter(self, label: str) -> None:
        now = time.perf_counter()
        if self.at is not None:
            self.phase_s[self.at] = round(now - self._since, 3)
        self.at, self._since = label, now
        self.store.set(progress_key(self.prefix, self.rank), label)

    def sync(self) -> None:
        if self.gpu:
            torch.cuda.synchronize(self.device)

    def _loss_scale(self) -> float:
        plant = self.plan.plant("grad", self.rank)
        return plant.amount if plant else 1.0

    # -- parity ------------------------------------------------------------------------------

    def parity(self, precision: str) -> dict[str, Any]:
        """The N-rank step against the one-rank step on the same global batch and seed."""
        self.enter(f"parity {precision}")
        mixed = precision == "bf16"
        torch.use_deterministic_algorithms(not mixed)
        try:
            one = self._parity_model(self.alone, mixed)
            many = self._parity_model(self.group, mixed)
            vocab = one.build.config.vocab_size
            batches = [
                {k: v.to(self.device) for k, v in causal_batch(PARITY_BATCH * self.world, PARITY_SEQ, vocab, s).items()}
                for s in range(PARITY_STEPS)
            ]
            mine = sharded.slice_of(batches[0], self.rank, self.world)
            peer = sharded.slice_of(batches[0], (self.rank + 1) % self.world, self.world)
            one.loss_scale = self._loss_scale()  # what this rank contributes: planted, if so
            own_prints = sharded.gradient_fingerprint(one, mine)
            one.loss_scale = 1.0
            peer_prints = sharded.gradient_fingerprint(one, peer)  # the next rank's micro-batch, computed here
            start = sharded.parameters_whole(one)
            losses_one = [float(one.step(b)) for b in batches]
            many.loss_scale = self._loss_scale()
            losses_many = []
            for batch in batches:
                loss = many.step(sharded.slice_of(batch, self.rank, self.world))
                dist.all_reduce(loss, group=self.group)
                losses_many.append(float(loss) / self.world)
            after_one, after_many = sharded.parameters_whole(one), sharded.parameters_whole(many)
        finally:
            torch.use_deterministic_algorithms(False)
        update_one = torch.cat([(after_one[n] - start[n]).flatten() for n in sorted(start)])
        update_many = torch.cat([(after_many[n] - start[n]).flatten() for n in sorted(start)])
        return {
            "losses_one": losses_one,
            "losses_many": losses_many,
            "loss_distance": sharded.relative_distance(losses_many, losses_one),
            "update_distance": float((update_many - update_one).norm() / update_one.norm()),
            "tokens": PARITY_BATCH * self.world * PARITY_SEQ,
            "own_prints": own_prints,
            "peer_prints": peer_prints,
        }

    def _parity_model(self, group: Any, mixed: bool) -> sharded.ShardedStep:
        return sharded.sharded_llama(
            "tiny", PARITY_LAYERS, PARITY_SEQ, self.device, group, mixed, optimizer="sgd", attn_implementation="eager"
        )

    # -- timed steps ---------------------------------------------------------------------------

    def fsdp(self) -> dict[str, Any]:
        """The Llama-3.1-8B-shaped step alone (a group of one), then sharded over the world."""
        return self._sharded("fsdp")

    def fsdp_float8(self) -> dict[str, Any]:
        """The same step with torchao's Float8 linears and FP8 all-gather in every decoder layer,
        each layer compiled (`sharded.float8_layers` says why); a skip (need vs found) where the
        device has no FP8 GEMM, is not a GPU, or torchao is not installed."""
        device = _device_info(self.device)
        reason = fp8_recipe_skip_reason(device, sharded.FLOAT8_RECIPE) or _torchao_missing()
        if reason:
            return {"skipped": reason}
        return {**self._sharded("fsdp-float8", device.fp8_formats), "fp8_formats": list(device.fp8_formats)}

    def _sharded(self, job: str, float8: tuple[str, ...] = ()) -> dict[str, Any]:
        plan = self.plan
        self.enter(f"{job} alone")
        solo_s, _, _ = self._timed(lambda: self._llama(self.alone, float8=float8), plan.batch)
        self.enter(f"{job} group")
        waits = _GatherWaits(self.device, plan.plant("slow", self.rank))
        group_s, peak, step = self._timed(lambda: self._llama(self.group, waits, float8), plan.batch, waits)
        return {
            "group_s": group_s,
            "solo_s": solo_s,
            "work_per_rank": plan.batch * plan.seq_len,
            "flops_per_rank": plan.batch * step.build.flops_per_sample,
            "peak_gib": peak,
            "wait_s": waits.per_step(),
            "layers": plan.layers,
            "seq_len": plan.seq_len,
            "batch": plan.batch,
            "gather_timing": waits.how,
        }

    def ddp(self) -> dict[str, Any]:
        plan = self.plan
        self.enter("ddp alone")
        solo_s, _, _ = self._timed(
            lambda: sharded.replicated_bert(plan.scale, self.device, self.alone), plan.bert_batch
        )
        self.enter("ddp group")
        group_s, peak, step = self._timed(
            lambda: sharded.replicated_bert(plan.scale, self.device, self.group), plan.bert_batch
        )
        return {
            "group_s": group_s,
            "solo_s": solo_s,
            "work_per_rank": plan.bert_batch,
            "flops_per_rank": plan.bert_batch * step.build.flops_per_sample,
            "peak_gib": peak,
            "seq_len": step.build.seq_len,
            "batch": plan.bert_batch,
        }

    def lora(self) -> dict[str, Any]:
        """MLPerf llama2_70b_lora's shape alone, then sharded over the world; a skip (need vs
        found) without peft."""
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            return {"skipped": "needs peft for the LoRA step (pip install peft), found none"}
        plan = self.plan
        self.enter("lora alone")
        solo_s, _, _ = self._timed(lambda: self._lora(self.alone), LORA_BATCH)
        self.enter("lora group")
        group_s, peak, step = self._timed(lambda: self._lora(self.group), LORA_BATCH)
        return {
            "group_s": group_s,
            "solo_s": solo_s,
            "work_per_rank": LORA_BATCH * plan.seq_len,
            # Forward and the activations' gradients, no weight gradients but the adapters': 2/3 of training's
            "flops_per_rank": LORA_BATCH * step.build.flops_per_sample * 2 / 3,
            "peak_gib": peak,
            "layers": plan.layers,
            "seq_len": plan.seq_len,
            "batch": LORA_BATCH,
        }

    def _lora(self, group: Any) -> sharded.ShardedStep:
        return sharded.lora_llama(self.plan.scale, self.plan.layers, self.plan.seq_len, self.device, group)

    def _llama(
        self, group: Any, waits: _GatherWaits | None = None, float8: tuple[str, ...] = ()
    ) -> sharded.ShardedStep:
        plan = self.plan
        step = sharded.sharded_llama(
            plan.scale, plan.layers, plan.seq_len, self.device, group, mixed=True, float8=float8
        )
        if waits is not None:
            waits.install(step.model)
        return step

    def _timed(
        self, build: Callable[[], sharded.ShardedStep], rows: int, waits: _GatherWaits | None = None
    ) -> tuple[list[float], float | None, sharded.ShardedStep]:
        """The plan's steps of the step `build` makes, on `rows` sequences of this rank's own:
        seconds per step and peak GiB. The models of the steps before are released first (FSDP's
        hooks keep them alive in cycles of objects): left to the garbage collector, the LoRA step's peak
        read 44.0 GiB in one run and 59.6 GiB in the next after the same Float8 step on 2 x H200."""
        gc.collect()
        if self.gpu:
            torch.cuda.empty_cache()
        step = build()
        batch = step.build.make_batch(rows, seed=self.rank)
        if self.gpu:
            torch.cuda.reset_peak_memory_stats(self.device)

        def sync() -> None:
            self.sync()
            if waits is not None:
                waits.collect()

        seconds = sharded.timed_steps(
            lambda: step.step(batch), self.plan.warmup, self.plan.steps, sync, time.perf_counter
        )
        peak = torch.cuda.max_memory_allocated(self.device) / GIB if self.gpu else None
        del step.optimizer  # the caller keeps the step for its figures; the next _timed empties the cache
        return seconds, peak, step

    def run(self, facts: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {**facts, "error": None, "at": None}
        try:
            if "parity" in self.plan.jobs:
                result["parity"] = {precision: self.parity(precision) for precision in ("fp32", "bf16")}
            if "fsdp" in self.plan.jobs:
                result["fsdp"] = self.fsdp()
            if "fsdp-float8" in self.plan.jobs:
                result["fsdp-float8"] = self.fsdp_float8()
            if "ddp" in self.plan.jobs:
                result["ddp"] = self.ddp()
            if "lora" in self.plan.jobs:
                result["lora"] = self.lora()
            self.enter("done")
        except Exception as exc:
            result["error"], result["at"] = one_line(exc), self.at
        result["phase_s"] = self.phase_s
        return result


def _device_info(device: torch.device) -> DeviceInfo:
    """This rank's device as the suites describe it (its FP8 formats, its `_scaled_mm`)."""
    if device.type == "cuda":
        return devices.discover_gpus(torch, os.environ)[device.index or 0]
    return devices.discover_cpu(torch, os.environ)


def _torchao_missing() -> str | None:
    try:
        fp8_recipes.import_library("torchao.float8")
    except LibraryMissing as missing:
        return library_skip_reason(missing, "train with Float8 linears")
    return None


class _GatherWaits:
    """Times FSDP's all-gathers on this rank (CUDA events around each, through FSDP2's custom
    all-gather hook), and acts out a planted slow all-gather: a GPU-side delay before each."""

    def __init__(self, device: torch.device, slow: Any) -> None:
        self.device, self.slow = device, slow
        self.events: list[tuple[Any, Any]] = []
        self.skip = 1  # the warm-up steps' all-gathers, collected at once
        self.steps: list[float] = []
        self.how = "not measured"

    def install(self, model: Any) -> None:
        try:
            from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather
        except ImportError:
            return
        if self.device.type != "cuda" or not hasattr(model, "set_custom_all_gather"):
            if self.slow is not None:
                raise RuntimeError("a planted slow all-gather needs a GPU and FSDP2's set_custom_all_gather")
            return
        waits = self
        cycles = int(self.slow.amount * 1e-3 * _clock_hz(self.device)) if self.slow is not None else 0

        class Timed(DefaultAllGather):
            def __call__(self, *args: Any, **kwargs: Any) -> Any:
                if cycles:
                    torch.cuda._sleep(cycles)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                work = super().__call__(*args, **kwargs)
                end.record()
                waits.events.append((start, end))
                return work

        gather = Timed()
        for module in model.modules():
            if hasattr(module, "set_custom_all_gather"):
                module.set_custom_all_gather(gather)
        self.how = "CUDA events around each FSDP all-gather (set_custom_all_gather)"

    def collect(self) -> None:
        """After a synchronised step: its all-gather seconds (the warm-up's dropped)."""
        if not self.events:
            return
        seconds = sum(s.elapsed_time(e) for s, e in self.events) / 1e3
        self.events.clear()
        if self.skip:
            self.skip -= 1
            return
        self.steps.append(seconds)

    def per_step(self) -> float | None:
        return sum(self.steps) / len(self.steps) if self.steps else None


def _clock_hz(device: torch.device) -> float:
    rate = getattr(torch.cuda.get_device_properties(device), "clock_rate", None)  # kHz
    return float(rate) * 1e3 if rate else 1.98e9


def verdict(out: str, rank: int, store: Any, prefix: str, world: int, timeout_s: float) -> int:
    """With --out (torchrun): rank 0 writes every rank's results and the verdicts; every rank
    exits 0 or 1 with the world's verdict."""
    from pathlib import Path

    from rocm_validate.results import jsonfile

    results, notes = gather(store, prefix, world, timeout_s)
    labels = [f"rank {r} ({(res or {}).get('host')}, {(res or {}).get('device')})" for r, res in enumerate(results)]
    problems = [f"{labels[r]}: {n}" for r, n in notes.items()]
    problems += [
        f"{labels[r]}: stopped at {res['at']}: {res['error']}" for r, res in enumerate(results) if res and res["error"]
    ]
    lines = list(problems)
    if not problems:
        complete = [r for r in results if r]
        if "parity" in complete[0]:
            for precision in ("fp32", "bf16"):
                check = verdicts.parity(precision, complete, labels)
                lines.append(("passed " if check.passed else "FAILED ") + check.message())
        for job in verdicts.TIMED_JOBS:
            if job in complete[0] and "skipped" in complete[0][job]:
                lines.append(f"{job}: skipped: {complete[0][job]['skipped']}")
            elif job in complete[0]:
                t = verdicts.throughput(job, complete)
                lines.append(
                    f"{job}: {t.per_gpu_rate:.1f} per GPU per s on {world} ranks, {t.tflops_per_gpu:.1f} TFLOP/s per GPU, "
                    f"scaling efficiency {t.efficiency:.3f}"
                )
                straggler = t.straggler(labels)
                if straggler:
                    lines.append("FAILED " + straggler.message)
        gain = verdicts.speedup("fsdp-float8", "fsdp", complete)
        if gain is not None:
            lines.append(f"fsdp-float8: {gain.value:.3f}x the fsdp step's tokens/s per GPU (fp8_speedup)")
    passed = not problems and not any(line.startswith("FAILED") for line in lines)
    if rank == 0:
        report = {"schema": verdicts.SCHEMA_ID, "results": results, "verdicts": lines, "passed": passed}
        jsonfile.write_json(Path(out), report, verdicts.REPORT_SCHEMA)
        print("\n".join(lines))
        print(f"rocm-validate training steps: {'passed' if passed else 'FAILED'}; wrote {out}")
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    env = os.environ
    member = join(
        "training steps",
        args.backend,
        lambda nccl: plan_from_arguments(args, nccl),
        env,
        bind_device=True,
        module="rocm_validate.collectives.training",
    )
    if member is None:
        return EXIT_USAGE
    rank, world, device, plan, store = member.rank, member.world, member.device, member.plan, member.store
    prefix = store_prefix(env) + "training/"
    facts: dict[str, Any] = {"rank": rank, "world": world, "host": socket.gethostname(), "device": str(device)}
    if device.type == "cuda":
        facts["device_name"] = str(torch.cuda.get_device_properties(device).name)
    result = TrainingRank(plan, rank, world, device, store, prefix).run(facts)
    return leave(
        member, result, prefix, lambda: verdict(args.out, rank, store, prefix, world, plan.timeout_s) if args.out else 0
    )


if __name__ == "__main__":
    raise SystemExit(main())
