"""Device-dependent parametrization of the correctness suite (the dtypes each check runs in), and
the margins of every check of a test recorded for the report.

Test ids name the dtype, so a GPU run (bf16, fp16) and a CPU run (fp32) list what they checked.
"""

from __future__ import annotations

import json

import pytest

from rocm_validate.core.session import run_state
from rocm_validate.correctness.compare import margins, recording_comparisons
from rocm_validate.results.metrics import NUMERICS_PROPERTY
from rocm_validate.workloads.shapes import attention_dtypes, gemm_dtypes


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, dtypes in (("attention_dtype", attention_dtypes), ("gemm_dtype", gemm_dtypes)):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, dtypes(run_state(metafunc.config).device().backend))


@pytest.fixture(autouse=True)
def _record_check_margins(request: pytest.FixtureRequest):
    """Every comparison a test judges lands in the JSON report with how close it came to its bounds."""
    with recording_comparisons() as found:
        yield
    if found:
        request.node.user_properties.append((NUMERICS_PROPERTY, json.dumps([margins(c) for c in found])))
