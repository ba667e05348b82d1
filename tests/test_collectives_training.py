"""The training collectives' pure parts: names and their data types, the error bound of a bf16 /
fp16 reduction in any order, its negative controls (a reduction done wrong in pure functions:
a rank's contribution dropped or doubled, a rounding more than the model allows), the FP8
all-gather's codes checked bit for bit, and their plan and verdict."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from rocm_validate.collectives import training_payloads as tp
from rocm_validate.collectives.busbw import bus_factor
from rocm_validate.collectives.formats import (
    BF16,
    FLOAT32,
    FP8_E4M3,
    FP8_E5M2,
    FP16,
    TRAINING_COLLECTIVES,
    WireFormat,
    gamma,
    split,
    sum_bound,
)
from rocm_validate.collectives.outcome import summarize
from rocm_validate.collectives.plan import CPU_PLAN, GPU_PLAN, parser, plan_for, plan_from_arguments

ELEMENTS = 4096
Reduction = Callable[[list[torch.Tensor], WireFormat], torch.Tensor]


def _contributions(world: int, fmt: WireFormat) -> list[torch.Tensor]:
    return [tp.gradient(rank, 0, ELEMENTS, fmt, "cpu") for rank in range(world)]


def _round(values: torch.Tensor, fmt: WireFormat) -> torch.Tensor:
    return values.to(tp.torch_dtype(fmt)).to(torch.float64)


def _in_order(order: list[int]) -> Reduction:
    """A ring's (or a chain's) sum: each partial sum rounded to the format, in `order`."""

    def reduce(terms: list[torch.Tensor], fmt: WireFormat) -> torch.Tensor:
        total = terms[order[0]]
        for rank in order[1:]:
            total = _round(total + terms[rank], fmt)
        return total

    return reduce


def _tree(terms: list[torch.Tensor], fmt: WireFormat) -> torch.Tensor:
    """A pairwise tree's sum, each node rounded to the format."""
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return _round(_tree(terms[:half], fmt) + _tree(terms[half:], fmt), fmt)


def _float32_then_once(terms: list[torch.Tensor], fmt: WireFormat) -> torch.Tensor:
    """Accumulated in float32, rounded to the format once (as an fp32-accumulating kernel)."""
    return _round(sum(t.float() for t in terms).double(), fmt)


def _margin(found: torch.Tensor, terms: list[torch.Tensor], fmt: WireFormat) -> tp.Excess:
    exact = sum(terms)
    magnitude = sum(t.abs() for t in terms)
    return tp.excess(found, exact, magnitude, len(terms), fmt)


def _coarser(values: torch.Tensor, fraction_bits: int) -> torch.Tensor:
    """Rounded to nearest even with `fraction_bits` stored bits: one bit coarser than the format."""
    mantissa, exponent = torch.frexp(values)
    steps = 2.0 ** (fraction_bits + 1)
    return torch.ldexp(torch.round(mantissa * steps) / steps, exponent)


def test_a_collectives_name_carries_its_data_type_and_float32_keeps_the_plain_name():
    assert split("reduce_scatter_bf16") == ("reduce_scatter", BF16)
    assert split("all_gather_fp8e5m2") == ("all_gather", FP8_E5M2)
    assert split("all_to_all") == ("all_to_all", FLOAT32)
    assert [split(name)[1].dtype for name in TRAINING_COLLECTIVES] == [
        "bfloat16",
        "float16",
        "bfloat16",
        "float16",
        "float8_e4m3fn",
        "float8_e5m2",
    ]


def test_unit_roundoff_and_gamma_are_highams():
    assert BF16.unit_roundoff == 2**-8 and FP16.unit_roundoff == 2**-11 and FLOAT32.unit_roundoff == 2**-24
    assert gamma(1, 2**-8) == pytest.approx(2**-8 / (1 - 2**-8))
    assert sum_bound(8, BF16) == pytest.approx(7 * 2**-8 / (1 - 7 * 2**-8))
    assert gamma(300, 2**-8) == float("inf")


def test_a_training_collectives_bus_factor_is_its_operations():
    assert bus_factor("all_reduce_bf16", 8) == bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather_fp8e4m3", 8) == bus_factor("reduce_scatter_fp16", 8) == pytest.approx(7 / 8)


@pytest.mark.parametrize("fmt", [BF16, FP16], ids=["bf16", "fp16"])
def test_gradient_payloads_are_exact_in_their_format_and_share_sign_and_binade_across_ranks(fmt):
    terms = _contributions(4, fmt)
    for term in terms:
        assert torch.equal(_round(term, fmt), term)
    assert torch.equal(sum(terms).abs(), sum(t.abs() for t in terms))  # nothing cancels
    assert not torch.equal(terms[0], terms[1])


@pytest.mark.parametrize("world", [2, 3, 4, 8])
@pytest.mark.parametrize("fmt", [BF16, FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize(
    "reduce",
    [_tree, _float32_then_once],
    ids=["pairwise-tree", "float32-then-one-rounding"],
)
def test_a_correct_reduction_in_any_order_stays_within_the_bound(world, fmt, reduce):
    terms = _contributions(world, fmt)
    found = reduce(terms, fmt)
    assert _margin(found, terms, fmt).count == 0
    for order in (list(range(world)), list(range(world))[::-1]):
        ring = _in_order(order)(terms, fmt)
        assert _margin(ring, terms, fmt).count == 0, order


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("fmt", [BF16, FP16], ids=["bf16", "fp16"])
def test_a_rank_whose_contribution_is_dropped_or_doubled_fails_at_every_element(world, fmt):
    terms = _contributions(world, fmt)
    dropped = _round(sum(terms[:-1]), fmt)
    doubled = _round(sum(terms) + terms[0], fmt)
    assert _margin(dropped, terms, fmt).count == ELEMENTS
    assert _margin(doubled, terms, fmt).count == ELEMENTS


@pytest.mark.parametrize("fmt", [BF16, FP16], ids=["bf16", "fp16"])
def test_a_sum_rounded_once_more_one_bit_coarser_than_the_format_fails_at_two_ranks(fmt):
    terms = _contributions(2, fmt)
    healthy = _in_order([0, 1])(terms, fmt)
    assert _margin(healthy, terms, fmt).largest_ratio <= 1
    wrong = _margin(_coarser(healthy, fmt.fraction_bits - 1), terms, fmt)
    assert wrong.count > ELEMENTS // 4 and wrong.largest_ratio > 1.5


def test_an_fp16_reduction_carried_in_bf16_fails():
    terms = _contributions(2, FP16)
    wrong = _margin(_round(sum(terms), BF16), terms, FP16)
    assert wrong.count > ELEMENTS // 2


def test_a_nan_in_a_reduced_result_is_beyond_any_bound():
    terms = _contributions(2, BF16)
    found = _in_order([0, 1])(terms, BF16)
    found[5] = float("nan")
    result = _margin(found, terms, BF16)
    assert result.count == 1 and result.first == 5 and result.largest_ratio == float("inf")


def test_the_bounded_check_finds_a_planted_drop_on_its_rank_and_names_the_first_element():
    world, count = 2, 2 * ELEMENTS
    _, recv = tp.buffers("reduce_scatter_bf16", 1, world, count, "cpu")
    exact = sum(tp.gradient(r, ELEMENTS, ELEMENTS, BF16, "cpu") for r in range(world))
    recv.copy_(exact.to(torch.bfloat16))
    assert tp.check("reduce_scatter_bf16", 1, world, count, recv)[0] is None
    tp.corrupt("reduce_scatter_bf16", 1, world, count, recv)
    problem, ratio = tp.check("reduce_scatter_bf16", 1, world, count, recv)
    assert problem is not None and ratio is not None and ratio > 1
    assert problem.startswith(
        "586 / 4096 elements beyond the bfloat16 reduction's error bound (14.3%; gamma_1 x sum|x| = 0.00392 x sum|x|); "
        "first at index 0: expected"
    )
    assert "(float64 sum)" in problem and "greatest error / bound" in problem


def test_the_check_works_in_slices_as_it_does_in_one(monkeypatch):
    world, count = 2, ELEMENTS
    _, recv = tp.buffers("all_reduce_fp16", 0, world, count, "cpu")
    recv.copy_(sum(tp.gradient(r, 0, count, FP16, "cpu") for r in range(world)).to(torch.float16))
    recv[1000] += 1
    recv[3000] += 1
    whole = tp.check("all_reduce_fp16", 0, world, count, recv)
    monkeypatch.setattr(tp, "CHUNK", 768)
    assert tp.check("all_reduce_fp16", 0, world, count, recv) == whole
    assert whole[0] is not None and whole[0].startswith("2 / 4096 elements") and "first at index 1000" in whole[0]


@pytest.mark.parametrize("fmt", [FP8_E4M3, FP8_E5M2], ids=["e4m3fn", "e5m2"])
def test_every_fp8_code_nan_patterns_included_is_sent_by_every_rank(fmt):
    for rank in range(3):
        sent = tp.codes(rank, 256, "cpu")
        assert sorted(sent.tolist()) == list(range(256))
        assert int(sent.view(tp.torch_dtype(fmt)).float().isnan().sum()) == (2 if fmt is FP8_E4M3 else 6)


def test_a_nan_whose_payload_bits_changed_is_a_wrong_fp8_gather():
    world, count = 2, 512
    _, recv = tp.buffers("all_gather_fp8e4m3", 0, world, count, "cpu")
    want = torch.cat([tp.codes(r, count // world, "cpu") for r in range(world)])
    recv.copy_(want)
    assert tp.check("all_gather_fp8e4m3", 0, world, count, recv) == (None, None)
    nan = int((want == 0x7F).nonzero()[0, 0])
    recv[nan] = 0xFF  # still a NaN in e4m3fn, a different code
    problem, ratio = tp.check("all_gather_fp8e4m3", 0, world, count, recv)
    assert ratio is None
    assert problem == (
        f"1 / 512 float8_e4m3fn codes differ (0.2%); first at index {nan}: expected 0x7f (nan), found 0xff (nan)"
    )


def test_the_planted_fp8_fault_flips_a_bit_the_check_sees():
    world, count = 2, 512
    _, recv = tp.buffers("all_gather_fp8e5m2", 1, world, count, "cpu")
    recv.copy_(torch.cat([tp.codes(r, count // world, "cpu") for r in range(world)]))
    tp.corrupt("all_gather_fp8e5m2", 1, world, count, recv)
    problem = tp.check("all_gather_fp8e5m2", 1, world, count, recv)[0]
    assert problem is not None and problem.startswith("74 / 512 float8_e5m2 codes differ")


def test_the_standard_level_runs_the_training_collectives_at_two_sizes_and_extended_at_every_size():
    assert plan_for("nccl", 2).training_sizes == (16 * 2**20, 256 * 2**20)
    assert plan_for("gloo", 2).training_sizes == (4096, 65536)
    assert plan_for("nccl", 8, "extended").training_sizes == GPU_PLAN.sizes
    assert plan_for("gloo", 2, "extended").training_sizes == CPU_PLAN.sizes
    assert plan_for("nccl", 2).sizes_of("all_reduce_bf16") == GPU_PLAN.training_sizes
    assert plan_for("nccl", 2).sizes_of("all_reduce") == GPU_PLAN.sizes


def test_a_plan_with_training_sizes_and_a_training_fault_survives_its_command_line():
    words = ["--training-sizes", "4KiB", "--fault", "reduce_scatter_bf16:1:corrupt"]
    plan = plan_from_arguments(parser().parse_args(words), gpu=False)
    assert plan.training_sizes == (4096,) and plan.fault("reduce_scatter_bf16", 1) is not None
    assert plan_from_arguments(parser().parse_args(plan.arguments()), gpu=True) == plan


def _rank(rank: int, ratio: float) -> dict:
    step = {"op": "all_reduce_bf16", "bytes": 4096, "mismatch": None, "error_ratio": ratio, "seconds": [1e-3]}
    return {"rank": rank, "steps": [step], "p2p": [], "error": None, "at": None}


def test_a_reductions_margin_is_its_worst_rank_in_the_verdict_the_report_and_the_table():
    outcome = summarize([_rank(0, 0.25), _rank(1, 0.5)], ["rank 0", "rank 1"], "gloo")
    step = outcome.steps_of("all_reduce_bf16")[0]
    assert step.error_ratio == 0.5 and outcome.passed
    assert outcome.to_dict()["steps"][0]["error_ratio"] == 0.5
    assert any(line.startswith("all_reduce_bf16") and "ok (error / bound 0.5)" in line for line in outcome.table())
