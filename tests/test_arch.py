"""The platform rules: pure functions of arch names and versions."""

import pytest

from rocm_validate.platform import arch, capabilities


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("gfx9010", "gfx90a"),  # rocm-smi < 6.4 printed the stepping in decimal
        ("gfx9012", "gfx90c"),
        ("gfx942", "gfx942"),
        ("gfx950", "gfx950"),
        ("gfx1100", "gfx1100"),
        ("gfx1201", "gfx1201"),
        ("gfx90a", "gfx90a"),
        ("GFX942", "gfx942"),
    ],
)
def test_gfx_names_are_normalized_to_their_canonical_form(written, canonical):
    assert arch.normalize_gfx(written) == canonical


def test_gcn_arch_name_splits_into_isa_and_feature_switches():
    parsed = arch.parse_gcn_arch("gfx942:sramecc+:xnack-")
    assert parsed == arch.GcnArch("gfx942", (("sramecc", True), ("xnack", False)))


def test_a_decimal_gfx_name_with_switches_is_normalized_too():
    assert arch.parse_gcn_arch("gfx9010:sramecc+:xnack-").name == "gfx90a"


@pytest.mark.parametrize(
    ("backend", "name", "formats"),
    [
        ("rocm", "gfx942", ("e4m3fnuz", "e5m2fnuz")),  # MI300X / MI325X / MI300A
        ("rocm", "gfx950", ("e4m3fn", "e5m2")),  # MI355X: OCP, not fnuz
        ("rocm", "gfx1201", ("e4m3fn", "e5m2")),
        ("rocm", "gfx90a", ()),  # MI250X has no FP8
        ("cuda", "sm_90", ("e4m3fn", "e5m2")),
        ("cuda", "sm_89", ("e4m3fn", "e5m2")),
        ("cuda", "sm_80", ()),
        ("cpu", "Intel Xeon", ("e4m3fn", "e5m2")),
    ],
)
def test_fp8_formats_follow_the_architecture(backend, name, formats):
    assert capabilities.fp8_formats(backend, name) == formats


@pytest.mark.parametrize(
    ("name", "rocm", "supported"),
    [
        ("gfx942", "6.2.41133", True),
        ("gfx950", "6.4.0", False),
        ("gfx950", "7.0.1", True),
        ("gfx1201", "6.2.0", False),
        ("gfx1201", "6.3.0", True),
        ("gfx90a", "7.0.0", False),
    ],
)
def test_scaled_mm_support_on_rocm_depends_on_arch_and_rocm_version(name, rocm, supported):
    assert capabilities.scaled_mm_supported("rocm", name, rocm) is supported


def test_scaled_mm_on_cuda_needs_sm89_or_newer():
    assert capabilities.scaled_mm_supported("cuda", "sm_90", "13.0")
    assert not capabilities.scaled_mm_supported("cuda", "sm_80", "13.0")


@pytest.mark.parametrize(
    ("archs", "rocm", "library"),
    [
        (["gfx942"] * 8, "6.2.0", "hipblaslt"),
        (["gfx90a", "gfx90a"], "6.0.0", "hipblaslt"),
        (["gfx950"], "6.5.0", "rocblas"),  # hipBLASLt is preferred on gfx950 from ROCm 7.0
        (["gfx950"], "7.0.0", "hipblaslt"),
        (["gfx1201"], "6.3.0", "rocblas"),  # and on gfx1200 / gfx1201 from ROCm 6.4
        (["gfx1200"], "6.4.0", "hipblaslt"),
        (["gfx942", "gfx1100"], "7.0.0", "rocblas"),  # one unsupported GPU turns it off for all
    ],
)
def test_default_rocm_blas_is_hipblaslt_only_when_every_visible_gpu_supports_it(archs, rocm, library):
    assert capabilities.default_rocm_blas(archs, rocm) == library


@pytest.mark.parametrize(
    ("value", "library"), [("0", "rocblas"), ("OFF", "rocblas"), ("1", "hipblaslt"), ("", "hipblaslt")]
)
def test_torch_blas_prefer_hipblaslt_0_forces_rocblas(value, library):
    assert capabilities.default_rocm_blas(["gfx942"], "6.4.0", prefer_hipblaslt=value) == library


def test_rocm_flash_attention_is_aotriton_unless_ck_is_asked_for_on_an_arch_ck_serves():
    assert capabilities.default_rocm_attention_library("gfx942") == "aotriton"
    assert capabilities.default_rocm_attention_library("gfx942", prefer_ck="1") == "ck"
    assert capabilities.default_rocm_attention_library("gfx1100", prefer_ck="1") == "aotriton"


def test_rowwise_scaled_mm_on_rocm_needs_torch_2_7_when_the_version_is_known():
    assert capabilities.scaled_mm_supported("rocm", "gfx942", "6.4.1", "rowwise", torch_version="2.7.1+rocm6.4")
    assert not capabilities.scaled_mm_supported("rocm", "gfx942", "6.4.1", "rowwise", torch_version="2.6.0+rocm6.4")
    assert capabilities.scaled_mm_supported("rocm", "gfx942", "6.4.1", "tensorwise", torch_version="2.6.0+rocm6.4")


def test_rocm_attention_has_flash_on_mi300_but_never_cudnn():
    backends = capabilities.attention_backends("rocm", "gfx942", True, True, True)
    assert backends == ("math", "flash", "mem_efficient")


def test_rocm_attention_on_an_unsupported_arch_is_math_only():
    assert capabilities.attention_backends("rocm", "gfx906", True, True, False) == ("math",)


def test_cuda_attention_offers_cudnn_on_hopper():
    assert capabilities.attention_backends("cuda", "sm_90", True, True, True) == (
        "math",
        "flash",
        "mem_efficient",
        "cudnn",
    )


def test_cuda_attention_without_flash_compiled_in_keeps_the_others():
    assert capabilities.attention_backends("cuda", "sm_90", False, True, False) == ("math", "mem_efficient")


@pytest.mark.parametrize(
    ("backend", "name", "isa", "partitions", "key"),
    [
        ("rocm", "AMD Instinct MI300X", "gfx942", (None, None), "amd-instinct-mi300x-gfx942"),
        ("rocm", "AMD Instinct MI300X", "gfx942", ("SPX", "NPS1"), "amd-instinct-mi300x-gfx942"),
        ("rocm", "AMD Instinct MI300X", "gfx942", ("CPX", "NPS4"), "amd-instinct-mi300x-gfx942-cpx-nps4"),
        ("rocm", "AMD Instinct MI355X", "gfx950", (None, None), "amd-instinct-mi355x-gfx950"),
        ("cuda", "NVIDIA H100 80GB HBM3", "sm_90", (None, None), "nvidia-h100-80gb-hbm3-sm90"),
        (
            "cpu",
            "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz",
            "x",
            (None, None),
            "cpu-intel-xeon-platinum-8480-2-0ghz",
        ),
    ],
)
def test_device_keys_are_stable_and_file_name_safe(backend, name, isa, partitions, key):
    assert arch.device_key(backend, name, isa, *partitions) == key


def test_infinity_cache_is_known_for_mi300_and_absent_elsewhere():
    assert arch.infinity_cache_bytes("rocm", "gfx942") == 256 * 1024**2
    assert arch.infinity_cache_bytes("rocm", "gfx90a") is None
    assert arch.infinity_cache_bytes("cuda", "sm_90") is None
