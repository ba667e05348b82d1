"""scaled_dot_product_attention: every SDPA kernel of the device against the float64 math golden,
forward and backward, across masks, V layouts, head dims 64 / 128 and large inputs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocm_validate.core.requirements import (
    not_validated,
    refusal_skip_reason,
)
from rocm_validate.correctness.attention import (
    NAMED_CASES,
    SDPA_KERNELS,
    LatestTruth,
    attention_skip_reason,
    check_attention,
    named_case,
    supports,
)
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.errors import BackendRefused


@pytest.fixture(scope="module")
def sdpa_truths() -> Iterator[LatestTruth]:
    """A case's inputs, math reference and float64 golden, drawn once for every kernel checked
    on it (the kernels of a case run one after another)."""
    truths = LatestTruth()
    yield truths
    truths.clear()


@pytest.mark.parametrize("sdpa_kernel", SDPA_KERNELS)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize(
    "case_name",
    [pytest.param(name, marks=pytest.mark.rocm_level("quick")) if name == "plain" else name for name in NAMED_CASES],
)
def test_sdpa_backend_matches_the_float64_golden(
    rocm_device, torch_device, sdpa_truths, sdpa_kernel, head_dim, case_name, attention_dtype
):
    reason = attention_skip_reason(sdpa_kernel, rocm_device)
    if reason:
        pytest.skip(reason)
    case = named_case(case_name, head_dim, attention_dtype, rocm_device.is_gpu)
    try:
        results = check_attention(case, sdpa_kernel, rocm_device, torch_device, truths=sdpa_truths)
    except BackendRefused as refusal:
        reason = refusal_skip_reason(f"{sdpa_kernel} SDPA to accept {case.describe()}", refusal)
        not_validated(reason) if supports(sdpa_kernel, case) else pytest.skip(reason)
    assert_passed(results)
