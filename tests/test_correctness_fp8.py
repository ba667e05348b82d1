"""FP8 reference: formats, the pure encoding, the delayed-scaling recipe, Fp8Linear and its
conversion helper, and the _scaled_mm platform rules."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.correctness.compare import sqnr_db
from rocm_validate.platform import capabilities
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads import fp8

FORMATS = list(fp8.FORMATS.values())


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_reference_decodes_every_pattern_as_torch_does(fmt):
    torch_values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fmt.dtype).double()
    ours = torch.tensor(fp8.all_values(fmt), dtype=torch.float64)
    assert torch.equal(torch.isnan(ours), torch.isnan(torch_values))
    finite = ~torch.isnan(ours)
    assert torch.equal(ours[finite], torch_values[finite])
    assert torch.equal(torch.signbit(ours[finite]), torch.signbit(torch_values[finite]))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_format_maxima_match_torch(fmt):
    assert fmt.max == torch.finfo(fmt.dtype).max


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_reference_rounds_like_torch_on_the_cpu(fmt):
    probes = fp8.rounding_probes(fmt)
    torch_bits = torch.tensor(probes, dtype=torch.float32).to(fmt.dtype).view(torch.uint8).tolist()
    assert [fp8.encode(p, fmt) for p in probes] == torch_bits


def test_ties_round_to_the_even_pattern():
    e4m3 = fp8.FORMATS["e4m3fn"]
    assert fp8.encode(1.0625, e4m3) == 0x38  # between 1.0 (0x38) and 1.125 (0x39): even wins
    assert fp8.encode(1.1875, e4m3) == 0x3A  # between 1.125 (0x39) and 1.25 (0x3A)


def test_fnuz_has_no_negative_zero_and_one_nan():
    fnuz, ocp = fp8.FORMATS["e4m3fnuz"], fp8.FORMATS["e4m3fn"]
    assert fp8.encode(-0.0, fnuz) == 0x00 and fp8.encode(-1e-10, fnuz) == 0x00
    assert fp8.encode(-0.0, ocp) == 0x80 and fp8.encode(-1e-10, ocp) == 0x80
    assert fp8.encode(math.nan, fnuz) == 0x80
    assert sum(math.isnan(v) for v in fp8.all_values(fnuz)) == 1


def test_the_reference_cast_saturates():
    e5m2 = fp8.FORMATS["e5m2"]
    assert fp8.decode(fp8.encode(1e9, e5m2), e5m2) == 57344.0
    assert fp8.decode(fp8.encode(-math.inf, e5m2), e5m2) == -57344.0


def test_overflow_rules_accept_saturation_or_nan_but_never_another_value():
    e4m3, e5m2 = fp8.FORMATS["e4m3fn"], fp8.FORMATS["e5m2"]
    assert fp8.overflow_allowed(e4m3, 896.0, 448.0) and fp8.overflow_allowed(e4m3, 896.0, math.nan)
    assert not fp8.overflow_allowed(e4m3, 896.0, 240.0)
    assert not fp8.overflow_allowed(e4m3, 896.0, -448.0)
    assert fp8.overflow_allowed(e5m2, math.inf, math.inf) and not fp8.overflow_allowed(e5m2, math.inf, 57344.0)
    assert not fp8.overflow_allowed(e5m2, math.inf, math.nan)


def test_unknown_formats_are_refused_by_name():
    with pytest.raises(ValueError, match="known: e4m3fn"):
        fp8.fp8_format("e4m3")


@pytest.mark.parametrize(
    "formats, message",
    [((), "no native FP8"), (("e4m3fn",), "two formats"), (("e4m3fn", "e5m2fnuz"), "both OCP or both fnuz")],
)
def test_format_pairs_are_checked(formats, message):
    with pytest.raises(ValueError, match=message):
        fp8.check_formats(formats)


def test_scale_is_fp8_max_over_amax_over_two_to_the_margin():
    scale = fp8.scale_from_amax(torch.tensor([2.0, 0.5]), 448.0, margin=1)
    assert scale.tolist() == [112.0, 448.0]


@pytest.mark.parametrize("amax", [0.0, math.inf, math.nan, 1e-45])
def test_an_unusable_amax_gives_scale_one(amax):
    assert fp8.scale_from_amax(torch.tensor(amax), 448.0, margin=0).item() == 1.0


def test_history_rolls_by_minus_one_with_row_zero_cleared():
    history = torch.tensor([[5.0], [1.0], [2.0], [3.0]])
    assert fp8.roll_history(history).flatten().tolist() == [0.0, 2.0, 3.0, 5.0]


class _PythonNumbersMadeTensors(TorchDispatchMode):
    """Counts Python numbers turned into tensors (aten.lift_fresh): on a GPU each is a pageable
    host-to-device copy, which waits for the device to finish everything queued before it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.lift_fresh.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("matmul", ["emulated", "scaled_mm"])
def test_an_fp8_layer_step_copies_no_host_number_into_a_tensor(matmul):
    layer = fp8.Fp8Linear(64, 32, formats=("e4m3fn", "e5m2"), matmul=matmul)
    x = torch.randn(4, 64, requires_grad=True)
    with _PythonNumbersMadeTensors() as watch:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x)
        out.float().sum().backward()
    assert watch.count == 0, f"{watch.count} Python numbers became tensors in one FP8 forward and backward"


def test_the_watch_for_host_numbers_sees_an_assigned_python_number():
    history = torch.ones(4, 3)
    with _PythonNumbersMadeTensors() as watch:
        history[0, 1] = 0
    assert watch.count == 1


def test_the_first_cast_uses_scale_one_and_the_next_the_delayed_scale():
    fmt = fp8.FORMATS["e4m3fn"]
    state = fp8.ScalingState(fp8.DelayedScaling(history_len=2), roles=1)
    _, first_inverse = state.cast(torch.tensor([4.0, -1.0]), 0, fmt)
    assert first_inverse.item() == 1.0 and state.scale.item() == 448.0 / 4.0
    _, second_inverse = state.cast(torch.tensor([1.0]), 0, fmt)
    assert second_inverse.item() == pytest.approx(4.0 / 448.0, rel=1e-7)
    assert state.scale.item() == 448.0 / 4.0  # the two-step window still holds the first step's 4.0


@pytest.mark.parametrize("bad", [dict(history_len=0), dict(margin=-1), dict(amax_compute="mean")])
def test_a_malformed_recipe_is_refused(bad):
    with pytest.raises(ValueError):
        fp8.DelayedScaling(**bad)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.GELU(),
        torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.Linear(48, 3, bias=False)),
    )


def test_convert_replaces_every_linear_and_keeps_its_parameters():
    model = _model()
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert fp8.convert_to_fp8_linear(model, ("e4m3fn", "e5m2")) == 3
    layers = [m for m in model.modules() if isinstance(m, fp8.Fp8Linear)]
    assert len(layers) == 3 and all(layer.weight is w for layer, w in zip(layers, weights))
    assert layers[2].bias is None


def test_a_converted_model_computes_and_trains_close_to_the_original():
    reference, model = _model(), _model()
    fp8.convert_to_fp8_linear(model, ("e4m3fn", "e5m2"))
    x = torch.randn(40, 32)
    for _ in range(2):  # fill the delayed-scaling history
        model(x).sum().backward()
    model.zero_grad()
    out, expected = model(x), reference(x)
    out.square().sum().backward()
    expected.square().sum().backward()
    first_fp8, first_ref = model[0].weight.grad, reference[0].weight.grad
    assert sqnr_db(expected, out) > 20 and sqnr_db(first_ref, first_fp8) > 17


def test_converting_a_lone_linear_is_refused():
    with pytest.raises(ValueError, match="wrap"):
        fp8.convert_to_fp8_linear(torch.nn.Linear(4, 4), ("e4m3fn", "e5m2"))


def test_convert_leaves_the_kept_modules_in_high_precision():
    model = _model()
    assert fp8.convert_to_fp8_linear(model, ("e4m3fn", "e5m2"), keep=("2.1",)) == 2
    assert type(model[2][1]) is torch.nn.Linear and isinstance(model[2][0], fp8.Fp8Linear)


def test_a_swap_puts_the_original_layers_back_with_the_same_parameters():
    model = _model()
    originals = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    swap = fp8.Fp8LinearSwap(model, ("e4m3fn", "e5m2"))
    swap.fp8()
    assert sum(isinstance(m, fp8.Fp8Linear) for m in model.modules()) == 3
    swap.original()
    restored = [m for m in model.modules() if isinstance(m, (torch.nn.Linear, fp8.Fp8Linear))]
    assert restored == originals


def test_under_autocast_the_output_takes_the_autocast_dtype_and_the_product_stays_float32():
    torch.manual_seed(2)
    linear = torch.nn.Linear(64, 32, bias=False)  # a bias is added after the cast to the output dtype
    layer = fp8.Fp8Linear.from_linear(linear, ("e4m3fn", "e5m2"), matmul="emulated")
    x = torch.randn(16, 64)
    results = []
    for enabled in (False, True):
        layer.scaling.amax_history.zero_()
        layer.scaling.scale.fill_(3.0)  # not a power of two, so a bf16 product rounds differently
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            results.append(layer(x))
    plain, cast = results
    assert plain.dtype == torch.float32 and cast.dtype == torch.bfloat16
    # a bf16 product would differ from the float32 one by far more than the final bf16 rounding
    assert torch.equal(cast, plain.to(torch.bfloat16))


@pytest.mark.parametrize("formats", [("e4m3fn", "e5m2"), ("e4m3fnuz", "e5m2fnuz")])
def test_scaled_mm_and_emulation_paths_agree_on_the_cpu(formats):
    torch.manual_seed(1)
    linear = torch.nn.Linear(48, 80)
    fast = fp8.Fp8Linear.from_linear(linear, formats, matmul="scaled_mm")
    emulated = fp8.Fp8Linear.from_linear(linear, formats, matmul="emulated")
    x = torch.randn(24, 48)
    one = torch.tensor(1.0)
    probe = torch.zeros(16, 16).to(fp8.FORMATS[formats[0]].dtype)
    try:
        torch._scaled_mm(probe, probe.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
    except RuntimeError as exc:
        pytest.skip(f"needs CPU torch._scaled_mm for {formats[0]}, found torch {torch.__version__} refuses it: {exc}")
    assert torch.allclose(fast(x), emulated(x), rtol=1e-5, atol=1e-5)


def test_padding_to_the_gpu_alignment_leaves_the_product_unchanged():
    fmt = fp8.FORMATS["e4m3fn"]
    a = torch.randn(7, 40).to(fmt.dtype)
    b = torch.randn(40, 24).to(fmt.dtype)
    one = torch.tensor(1.0)
    padded = fp8.fp8_mm(a, b, one, one, torch.float32, use_scaled_mm=True, alignment=16)
    assert torch.equal(padded, a.float() @ b.float())


def test_an_unknown_matmul_mode_is_refused():
    with pytest.raises(ValueError, match="'auto', 'scaled_mm' or 'emulated'"):
        fp8.Fp8Linear(4, 4, matmul="fast")


@pytest.mark.parametrize(
    "backend, arch_name, runtime, supported",
    [
        ("cuda", "sm_90", "13.0", True),
        ("cuda", "sm_89", "12.4", False),
        ("rocm", "gfx942", "6.4.1", True),
        ("rocm", "gfx942", "6.3.0", False),
        ("rocm", "gfx90a", "7.0", False),
        ("cpu", "x86", None, True),
    ],
)
def test_rowwise_scaled_mm_support_follows_arch_and_runtime(backend, arch_name, runtime, supported):
    assert capabilities.scaled_mm_supported(backend, arch_name, runtime, "rowwise") is supported


def test_rowwise_scaled_mm_gives_bf16_only_on_gpus():
    assert capabilities.scaled_mm_out_dtypes("rocm", "rowwise") == ("bfloat16",)
    assert capabilities.scaled_mm_out_dtypes("cuda", "tensorwise") == ("bfloat16", "float32")
    assert capabilities.scaled_mm_alignment("rocm") == 16 and capabilities.scaled_mm_alignment("cpu") == 1


def _gpu(arch_name: str, runtime: str = "6.4.1") -> DeviceInfo:
    return DeviceInfo(
        backend="rocm",
        index=0,
        name="AMD Instinct",
        arch=arch_name,
        device_key="k",
        runtime_version=runtime,
        fp8_formats=capabilities.fp8_formats("rocm", arch_name),
        scaled_mm=capabilities.scaled_mm_supported("rocm", arch_name, runtime),
    )


def test_scaled_mm_skips_say_what_is_needed_and_what_was_found():
    assert scaled_mm_skip_reason(_gpu("gfx942")) is None
    assert "needs native FP8, found none on gfx90a" in scaled_mm_skip_reason(_gpu("gfx90a"))
    assert "found gfx950" in scaled_mm_skip_reason(_gpu("gfx950", "6.4.0"))
    assert "row-wise" in scaled_mm_skip_reason(_gpu("gfx942", "6.2.0"), "rowwise")
    assert "float32 output" in scaled_mm_skip_reason(_gpu("gfx942"), "rowwise", "float32")
