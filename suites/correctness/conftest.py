"""Device-dependent parametrization of the correctness suite: the dtypes each check runs in.

Test ids name the dtype, so a GPU run (bf16, fp16) and a CPU run (fp32) list what they checked.
"""

from __future__ import annotations

import pytest

from rocm_validate.core.session import run_state
from rocm_validate.workloads.shapes import attention_dtypes, gemm_dtypes


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, dtypes in (("attention_dtype", attention_dtypes), ("gemm_dtype", gemm_dtypes)):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, dtypes(run_state(metafunc.config).device().backend))
