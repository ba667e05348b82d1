"""Pure decisions of the correctness suite, on the facts of devices we do not have."""

from __future__ import annotations

import pytest

from rocm_validate.correctness.attention import (
    NAMED_CASES,
    AttentionCase,
    attention_skip_reason,
    named_case,
)
from rocm_validate.correctness.blas import blas_skip_reason
from rocm_validate.platform import capabilities
from rocm_validate.platform.capabilities import blas_library
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.shapes import (
    GEMM_SHAPES,
    attention_dtypes,
    attention_size,
    gemm_dtypes,
    gemm_problem,
)


def _device(backend: str, arch_name: str, attention: tuple[str, ...]) -> DeviceInfo:
    return DeviceInfo(
        backend=backend,
        index=None if backend == "cpu" else 0,
        name="test device",
        arch=arch_name,
        device_key="k",
        attention_backends=attention,
        preferred_blas="mkl" if backend == "cpu" else None,
    )


@pytest.mark.parametrize(
    "choice, backend, library",
    [
        ("blaslt", "rocm", "hipblaslt"),
        ("blas", "rocm", "rocblas"),
        ("blaslt", "cuda", "cublaslt"),
        ("blas", "cuda", "cublas"),
        ("default", "rocm", None),
        ("blaslt", "cpu", None),
    ],
)
def test_a_blas_choice_names_the_platforms_library(choice, backend, library):
    assert blas_library(choice, backend) == library


def test_a_gpu_blas_choice_skips_on_the_cpu_saying_why():
    reason = blas_skip_reason("blaslt", _device("cpu", "Xeon", ("math", "flash")))
    assert reason.startswith("needs a GPU BLAS library choice") and "found cpu (mkl)" in reason
    assert blas_skip_reason("default", _device("cpu", "Xeon", ("math",))) is None


def test_an_unknown_blas_choice_is_refused():
    with pytest.raises(ValueError, match="default, blaslt, blas"):
        blas_library("hipblas", "rocm")


def test_gemm_shapes_come_from_the_model_configs():
    assert GEMM_SHAPES["llama-3.1-8b.qkv"] == (4096 + 2 * 1024, 4096)
    assert GEMM_SHAPES["llama-3.1-8b.gate_up"] == (2 * 14336, 4096)
    assert GEMM_SHAPES["bert-large.ffn_down"] == (1024, 4096)


def test_cpu_gemms_shrink_but_keep_k_and_n_multiples_of_16():
    for name in GEMM_SHAPES:
        gpu, cpu = gemm_problem(name, True), gemm_problem(name, False)
        assert (gpu.n, gpu.k) == GEMM_SHAPES[name] and gpu.m == 2048
        assert cpu.n % 16 == 0 and cpu.k % 16 == 0 and cpu.n * 16 == gpu.n


def test_attention_runs_real_sizes_on_gpus_and_fp32_on_the_cpu():
    assert attention_size(64, True).seq == 512 and attention_size(128, True).heads == 32
    assert attention_dtypes("cpu") == ("float32",) and attention_dtypes("rocm") == ("bfloat16", "float16")
    assert gemm_dtypes("cuda") == ("bfloat16", "float16", "float32")


def test_attention_backend_skips_name_what_the_device_has():
    mi300 = _device("rocm", "gfx942", capabilities.attention_backends("rocm", "gfx942", True, True, False))
    assert attention_skip_reason("flash", mi300) is None
    assert (
        attention_skip_reason("cudnn", mi300)
        == "needs the cudnn SDPA backend, found math, flash, mem_efficient on gfx942"
    )


def test_named_cases_cover_the_known_bug_classes():
    cases = {name: named_case(name, 128, "bfloat16", True) for name in NAMED_CASES}
    assert cases["v-transposed"].v_layout == "transposed" and cases["bool-mask"].mask == "bool"
    assert cases["large-inputs"].input_scale > 1 and cases["short-queries"].seq_q < cases["short-queries"].seq_k


def test_a_case_with_an_unknown_mask_is_refused():
    with pytest.raises(ValueError, match="mask must be one of"):
        AttentionCase(1, 1, 8, 8, 64, "float32", mask="sliding")
