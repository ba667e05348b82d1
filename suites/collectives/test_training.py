"""The node trains: the Llama-3.1-8B-shaped decoder sharded with FSDP2 (in bf16, and at the extended
level with torchao's Float8 linears and FP8 all-gather) and BERT-L with DDP over every selected device (one rank per GPU, or gloo ranks on the CPU), each timed on the group and
alone, and the N-rank step checked against the one-rank step on the same global batch and seed
(rocm_validate/collectives/steps.py says how, with its error model).

The world runs once (the `training_steps` fixture) and each test reads its part; a rank that
died or hung fails every test that needed it, naming it. A failure that one rank explains (a wrong
gradient contribution, the rank the others waited for) blames that rank's GPU, so the verdict
drains it instead of rolling back the image.
"""

from __future__ import annotations

import pytest

from rocm_validate.collectives.steps import parity, speedup, throughput
from rocm_validate.core.categorize import fail_as
from rocm_validate.perf.attribution import held_back_by
from rocm_validate.platform import peaks
from rocm_validate.results.peers import PeerSample, compare

MODELS = {"fsdp": "llama-3.1-8b", "fsdp-float8": "llama-3.1-8b", "ddp": "bert-large", "lora": "llama-2-70b-lora"}
# The Float8 step, DDP BERT-L and the LoRA step run at the extended level (steps.py STANDARD_JOBS).
EXTENDED_JOBS = ("fsdp-float8", "ddp", "lora")
JOBS = ["fsdp", *(pytest.param(job, marks=pytest.mark.rocm_level("extended")) for job in EXTENDED_JOBS)]
UNITS = {"fsdp": "tokens/s", "fsdp-float8": "tokens/s", "ddp": "samples/s", "lora": "tokens/s"}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_sharded_step_computes_what_one_rank_computes(training_steps, precision) -> None:
    results = training_steps.require("parity")
    check = parity(precision, results, training_steps.world.labels)
    if not check.passed:
        fail_as("numerics", check.message(), gpus=training_steps.world.gpus_of(check.wrong_ranks))
    print(check.message())  # the measured margin, in the report of a run with -rA


def _prefix(training_steps, job: str, result: dict) -> str:
    plan = training_steps.plan
    scale = "" if plan.scale == "full" else f"-{plan.scale}"
    part = result[job]  # the step's size in its name: each level's (and the CPU's) has baselines of its own
    depth = f"-{part['layers']}l" if job != "ddp" else f"-{part['batch']}x{part['seq_len']}"
    return f"train.{job}.{MODELS[job]}{scale}{depth}.{training_steps.world.size}ranks"


@pytest.mark.parametrize("job", JOBS)
def test_the_step_over_the_node_holds_its_baseline(training_steps, job, perf, rocm_device) -> None:
    """Throughput per GPU, model TFLOP/s per GPU (its fraction of the bf16 peak is the MFU, for the
    Float8 step too, as torchtitan reports it), peak memory and the scaling efficiency against the
    same per-GPU batch alone, each against this device's baseline for this many GPUs; the Float8
    step's tokens/s/GPU over the bf16 step's of the same run too (`fp8_speedup`). A loss while one
    rank held the step back is that rank's GPU's (the perf gate's attribution reads `held_back_by`)."""
    results = training_steps.require(job)
    measured = throughput(job, results)
    prefix = _prefix(training_steps, job, results[0])
    common = {"dispersion": measured.dispersion, "samples": training_steps.plan.steps}
    world = training_steps.world
    straggler = measured.straggler(world.labels)
    # a loss of the step's speed while one rank held it back is blamed on that rank's GPU
    blame = {"telemetry": held_back_by(world.gpus_of([straggler.rank]), straggler.message)} if straggler else {}
    unit = UNITS[job]
    peak = peaks.peak_for(rocm_device, "bf16") if rocm_device.is_gpu else None
    extra = {"world": measured.world, "solo_s": list(measured.solo_s), "group_s": measured.group_s}
    extra["phase_s"] = [r.get("phase_s") for r in training_steps.results if r]  # where each rank's run went
    if peak:
        extra["mfu"] = measured.tflops_per_gpu / peak
    rate = f"{prefix}.{unit.split('/')[0]}_per_s_per_gpu"
    perf.record(rate, measured.per_gpu_rate, unit, "higher", extra=blame, **common)
    perf.record(
        f"{prefix}.model_tflops_per_gpu",
        measured.tflops_per_gpu,
        "TFLOP/s",
        "higher",
        peak=peak,
        extra={**extra, **blame},
        **common,
    )
    perf.record(f"{prefix}.scaling_efficiency", measured.efficiency, "ratio", "higher", extra=blame, **common)
    memory = [m for m in measured.peak_gib if m is not None]
    if memory:
        perf.record(f"{prefix}.peak_memory", max(memory), "GiB", "lower")
    gain = speedup(job, "fsdp", results) if job == "fsdp-float8" else None
    if gain is not None:
        default = f"{_prefix(training_steps, 'fsdp', results[0])}.tokens_per_s_per_gpu"
        perf.record(
            f"{prefix}.fp8_speedup",
            gain.value,
            "x",
            "higher",
            dispersion=gain.dispersion,
            samples=training_steps.plan.steps,
            extra={"default": default},
        )


@pytest.mark.parametrize("job", JOBS)
def test_no_gpu_holds_the_step_back(training_steps, job, noise_band) -> None:
    """Each rank's step alone against the median of its peers, and, for the sharded step, the rank
    the others waited for in the all-gathers: the slow GPU is named even with no baseline, and
    blamed: one GPU that differs from its peers is hardware."""
    results = training_steps.require(job)
    measured = throughput(job, results)
    labels = training_steps.world.labels
    samples = [
        PeerSample(labels[r], measured.work_per_rank / s, measured.solo_spread[r])
        for r, s in enumerate(measured.solo_s)
    ]
    name = f"{_prefix(training_steps, job, results[0])}.scaling_efficiency"
    flagged = [
        f
        for f in compare(f"{job} step alone", UNITS[job], "higher", samples, lambda a, b: noise_band(name, (a, b)))
        if f.flagged
    ]
    straggler = measured.straggler(labels)
    ranks = [labels.index(f.subject) for f in flagged] + ([straggler.rank] if straggler else [])
    if ranks:
        messages = [f.message for f in flagged] + ([straggler.message] if straggler else [])
        fail_as("hardware", "\n".join(messages), gpus=training_steps.world.gpus_of(ranks))
