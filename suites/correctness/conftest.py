"""Device-dependent parametrization of the correctness suite (the dtypes each check runs in), and
the margins of every check of a test recorded for the report (with its call's report, where its
category and a known defect are decided).

Test ids name the dtype, so a GPU run (bf16, fp16) and a CPU run (fp32) list what they checked.
"""

from __future__ import annotations

import json

import pytest

from rocm_validate.core.session import run_state
from rocm_validate.correctness.compare import margins, recording_comparisons
from rocm_validate.results.metrics import NUMERICS_PROPERTY
from rocm_validate.workloads.shapes import attention_dtypes, block_dtypes, gemm_dtypes

# Building-block cases that also run at the quick level.
QUICK_BLOCKS = {("layer_norm", "bfloat16"), ("gelu", "float32"), ("softmax", "bfloat16")}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    backend = run_state(metafunc.config).device().backend
    for name, dtypes in (
        ("attention_dtype", attention_dtypes),
        ("gemm_dtype", gemm_dtypes),
        ("block_dtype", block_dtypes),
    ):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, dtypes(backend))
    if "block_case" in metafunc.fixturenames:
        metafunc.parametrize("block_case", _block_cases(backend != "cpu"))


def _block_cases(is_gpu: bool) -> list[object]:
    """One case per building block, model shape and dtype; ids such as 'layer_norm-bert-large-bfloat16'."""
    from rocm_validate.correctness.blocks import BLOCKS, block_ids

    cases: list[object] = []
    for block in BLOCKS.values():
        for name, model, dtype in block_ids(block, is_gpu):
            quick = (name, dtype) in QUICK_BLOCKS and model in (None, "bert-large")
            marks = [pytest.mark.rocm_level("quick")] if quick else []
            case_id = "-".join(part for part in (name, model, dtype) if part)
            cases.append(pytest.param((name, model, dtype), marks=marks, id=case_id))
    return cases


_COMPARISONS = pytest.StashKey[list]()  # the comparisons a test judged, until its call's report is made


@pytest.fixture(autouse=True)
def _record_check_margins(request: pytest.FixtureRequest):
    """Every comparison a test judges lands in the JSON report with how close it came to its bounds."""
    with recording_comparisons() as found:
        request.node.stash[_COMPARISONS] = found
        yield


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """The margins join the test's properties before its call's report is made, so the report that
    is categorized and matched against known defects (rocm_validate.core.known_defects) has them."""
    found = item.stash.get(_COMPARISONS, None) if call.when == "call" else None
    if found:
        item.user_properties.append((NUMERICS_PROPERTY, json.dumps([margins(c).to_dict() for c in found])))
    return (yield)
