"""PyTorch TunableOp: a user's results file against this stack (its validators; every entry's
solution against float64), and every solution TunableOp selects for the suite's GEMM shapes
against float64 with the default path's bounds. GPU only: TunableOp tunes GPU BLAS libraries."""

from __future__ import annotations

import json
import warnings

import pytest

from rocm_validate.core.categorize import fail_as
from rocm_validate.core.requirements import not_validated
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.tunable import (
    attention_gemms,
    check_entries,
    check_tuned_bmm,
    check_tuned_linear,
    file_conflicts,
)
from rocm_validate.workloads.shapes import GEMM_SHAPES, gemm_problem
from rocm_validate.workloads.tunableop import tunableop_session
from rocm_validate.workloads.tunableop_results import ignored_message, validator_mismatches

# The file checks come first: TunableOp keeps the first solution it holds for a shape, so the
# file must be read before this process tunes the suite's own shapes.


def test_tunableop_results_file_is_used_by_this_stack(tunableop_scratch, torch_device, tunableop_results_file):
    found = tunableop_results_file
    with tunableop_session(tunableop_scratch, tuning=False) as session:
        running = session.register_validators(torch_device)
        loaded = session.read_file(found.path)
    mismatches = validator_mismatches(found.results.validator_map, running)
    message = ignored_message(str(found.path), mismatches, loaded)
    if message:
        fail_as("configuration", message)


def test_tunableop_results_file_entries_match_float64(
    request, tunableop_scratch, rocm_device, torch_device, tunableop_results_file, tunableop_switchable
):
    found = tunableop_results_file
    held = file_conflicts(found.results)
    with tunableop_session(tunableop_switchable, tuning=True) as session:
        running = session.register_validators(torch_device)
        if validator_mismatches(found.results.validator_map, running) or not session.read_file(found.path):
            not_validated(
                f"{found.path} is ignored by TunableOp on this stack (test_tunableop_results_file_is_used_by_this_stack says why)"
            )
        outcomes = check_entries(found.results, rocm_device, torch_device, session, held)
    request.node.user_properties.append(("tunableop_entries", json.dumps([o.to_dict() for o in outcomes])))
    skipped = [f"{o.entry.describe()}: {o.not_checked}" for o in outcomes if o.comparison is None]
    if skipped:
        warnings.warn(f"{len(skipped)} entries of {found.path} not checked:\n" + "\n".join(skipped), stacklevel=1)
    judged = [o.comparison for o in outcomes if o.comparison is not None]
    if not judged:
        reasons = sorted({o.not_checked for o in outcomes}) or ["the file holds no entries"]
        not_validated(f"no entry of {found.path} was checked: {'; '.join(reasons)}")
    assert_passed(judged)


@pytest.mark.parametrize("bias", ["bias", "no-bias"])
@pytest.mark.parametrize("shape", list(GEMM_SHAPES))
def test_tunableop_selected_gemm_matches_float64(rocm_device, torch_device, tunableop_tuning, shape, gemm_dtype, bias):
    problem = gemm_problem(shape, rocm_device.is_gpu)
    with tunableop_session(tunableop_tuning, tuning=True) as session:
        comparison = check_tuned_linear(problem, gemm_dtype, bias == "bias", rocm_device, torch_device, session)
    assert_passed([comparison])


@pytest.mark.parametrize("gemm", ["scores", "context"])
def test_tunableop_selected_attention_bmm_matches_float64(
    rocm_device, torch_device, tunableop_tuning, gemm, gemm_dtype
):
    batched = attention_gemms(rocm_device.is_gpu, gemm_dtype)[gemm]
    with tunableop_session(tunableop_tuning, tuning=True) as session:
        comparison = check_tuned_bmm(gemm, batched, rocm_device, torch_device, session)
    assert_passed([comparison])
