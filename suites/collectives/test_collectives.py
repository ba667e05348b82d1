"""Every collective over one process group of the selected devices (RCCL / NCCL on GPUs, gloo
ranks on the CPU), in float32 and as training calls them (bf16 / fp16 gradient reductions, FP8
all-gathers): the result on every rank exactly as expected (a bf16 / fp16 reduction within the
error bound of its reduction order, against the float64 sum), bus bandwidth per message size
against this device's baseline (the perf gate), no drop in bandwidth as messages grow, and a
peer-to-peer copy between every pair of devices with the slow pair named.

The world runs once (the `collectives` fixture) and each test reads its part of the outcome; a
rank that died or hung fails every test that needed it, naming it. A wrong result on some ranks
only, or a slow or wrong pair, blames those ranks' GPUs, so the verdict drains them; wrong on every
rank, it is every GPU's (the image).
"""

from __future__ import annotations

import pytest

from rocm_validate.collectives.busbw import (
    DIP_MIN_DROP,
    EVERY_COLLECTIVE,
    BandwidthPoint,
    find_dips,
)
from rocm_validate.collectives.formats import split
from rocm_validate.collectives.outcome import suspects
from rocm_validate.core.categorize import fail_as
from rocm_validate.results.peers import PeerSample, compare

EXACT = tuple(op for op in EVERY_COLLECTIVE if split(op)[1].exact)
ROUNDED = tuple(op for op in EVERY_COLLECTIVE if not split(op)[1].exact)


def _fail_on_wrong_ranks(collectives, op: str) -> None:
    """Fail as numerics naming every rank whose `op` result differed, blaming their GPUs."""
    failures = collectives.outcome.data_failures(op)
    if failures:
        gpus = collectives.world.gpus_of(collectives.outcome.wrong_ranks(op))
        fail_as("numerics", f"{op} gave the wrong result:\n" + "\n".join(failures), gpus=gpus)


@pytest.mark.parametrize("op", EXACT)
def test_every_rank_holds_exactly_the_expected_result(collectives, op) -> None:
    collectives.require_complete(op)
    _fail_on_wrong_ranks(collectives, op)


@pytest.mark.parametrize("op", ROUNDED)
def test_every_rank_holds_the_sum_within_the_error_bound_of_any_reduction_order(collectives, op) -> None:
    """|result - float64 sum| <= gamma_(n-1) sum|x| on every element of every rank (formats.sum_bound)."""
    collectives.require_complete(op)
    _fail_on_wrong_ranks(collectives, op)


@pytest.mark.parametrize("op", EVERY_COLLECTIVE)
def test_bus_bandwidth_holds_its_baseline(collectives, op, perf) -> None:
    collectives.require_complete(op)
    for step in collectives.outcome.steps_of(op):
        perf.record(
            collectives.metric_name(step),
            step.busbw,
            "GB/s",
            "higher",
            dispersion=step.dispersion,
            samples=len(step.seconds),
            extra=collectives.step_extra(step),
        )


@pytest.mark.parametrize("op", EVERY_COLLECTIVE)
def test_bus_bandwidth_does_not_drop_as_messages_grow(collectives, op, noise_band) -> None:
    """cvs's rule (no drop of more than 5% to the next size), widened where the rounds' own noise
    says a larger drop is noise, by the perf gate's band for that metric."""
    collectives.require_complete(op)
    steps = {step.nbytes: step for step in collectives.outcome.steps_of(op)}

    def allowed(smaller: BandwidthPoint, larger: BandwidthPoint) -> tuple[float, str]:
        band = noise_band(collectives.metric_name(steps[larger.nbytes]), (smaller.dispersion, larger.dispersion))
        if band is None or band[0] <= DIP_MIN_DROP:
            return DIP_MIN_DROP, "cvs's 5% rule"
        return band[0], f"the noise band {band[1]}"

    dips = find_dips([BandwidthPoint(s.nbytes, s.busbw or 0.0, s.dispersion) for s in steps.values()], allowed)
    assert not dips, "\n".join(dip.message(op) for dip in dips)


def test_every_pair_copies_exact_data(collectives) -> None:
    world = collectives.world.size
    expected = world * (world - 1) // 2
    pairs = collectives.outcome.pairs
    if len(pairs) < expected and collectives.outcome.problems:
        collectives.fail_for_group(
            f"peer-to-peer copies ({len(pairs)} of {expected} pairs): " + "; ".join(collectives.outcome.problems)
        )
    problems = [f"{collectives.pair_subject(p)}: no result from one side" for p in pairs if p.missing]
    problems += [f"{collectives.pair_subject(p)}: {p.mismatch}" for p in pairs if p.mismatch]
    if problems:
        gpus = collectives.world.gpus_of(suspects([(p.src, p.dst) for p in pairs if p.missing or p.mismatch]))
        fail_as(
            "numerics", f"peer-to-peer copies ({len(pairs)} of {expected} pairs):\n" + "\n".join(problems), gpus=gpus
        )


def test_peer_to_peer_bandwidth_of_every_pair(collectives, perf, noise_band) -> None:
    """Each pair against its baseline, and against the median of the other pairs: the slow pair
    is named even with no baseline, and its GPUs blamed (the GPU in every slow pair, if one is):
    one GPU that differs from its peers is hardware."""
    measured = [p for p in collectives.outcome.pairs if p.bandwidth is not None and not p.missing]
    if not measured:
        collectives.fail_for_group("no peer-to-peer copy was measured: " + "; ".join(collectives.outcome.problems))
    samples, subjects = [], {}
    for pair in measured:
        perf.record(
            collectives.pair_name(pair),
            pair.bandwidth,
            "GB/s",
            "higher",
            dispersion=pair.dispersion,
            samples=len(pair.seconds),
            extra={"src": pair.src, "dst": pair.dst, "bytes": pair.nbytes},
        )
        samples.append(PeerSample(collectives.pair_subject(pair), pair.bandwidth, pair.dispersion))
        subjects[collectives.pair_subject(pair)] = (pair.src, pair.dst)
    name = collectives.pair_name(measured[0])
    slow = [
        f
        for f in compare("p2p copy bandwidth", "GB/s", "higher", samples, lambda a, b: noise_band(name, (a, b)))
        if f.flagged
    ]
    if slow:
        gpus = collectives.world.gpus_of(suspects([subjects[f.subject] for f in slow]))
        fail_as("hardware", "\n".join(f.message for f in slow), gpus=gpus)
