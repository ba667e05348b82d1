"""FP8 training recipes: importing optional libraries (missing is a skip, broken is a failure),
what each recipe needs from a device, the adapters, the worst-tile search, and negative controls:
the real recipe checks on the CPU (tiny Llama blocks) fail a zeroed gradient tile, a weight scale
off by 2x and an output off by 8%, and pass the healthy recipe. The project's recipe always runs;
torchao's run where torchao is installed (its float8 training runs on the CPU through
torch._scaled_mm) and skip saying so where it is not."""

from __future__ import annotations

import sys
import textwrap

import fake_devices
import pytest
import torch

from rocm_validate.convergence import minibert
from rocm_validate.core.requirements import (
    fp8_recipe_skip_reason,
    library_skip_reason,
)
from rocm_validate.correctness import fp8 as checks
from rocm_validate.correctness.tolerances import Rule, Tolerance, tolerance_for
from rocm_validate.errors import LibraryMissing
from rocm_validate.platform import capabilities
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads import fp8, fp8_recipes
from rocm_validate.workloads.fp8_recipes import RECIPES

OCP = ("e4m3fn", "e5m2")
CPU = fake_devices.cpu()
CPU_RECIPES = ("project-delayed", "torchao-tensorwise", "torchao-rowwise", "torchao-rowwise_with_gw_hp")


def _needs_library(name: str) -> None:
    """Skip, saying what is missing, when a recipe's library is not installed."""
    recipe = RECIPES[name]
    if not recipe.package:
        return
    try:
        fp8_recipes.import_library(recipe.package)
    except LibraryMissing as missing:
        pytest.skip(library_skip_reason(missing, f"run {name} on the CPU"))


def _case(name: str, kind: str = "ffn") -> checks.RecipeCase:
    _needs_library(name)
    return checks.RecipeCase(RECIPES[name], kind, "tiny", OCP, "float32")


# --- importing optional libraries ---------------------------------------------------------------


def test_a_library_that_is_not_installed_is_missing_and_names_the_extra():
    with pytest.raises(LibraryMissing) as missing:
        fp8_recipes.import_library("rocm_validate_absent_library.float8")
    assert missing.value.package == "rocm_validate_absent_library"
    assert "pip install rocm-validate[fp8]" in str(missing.value)
    reason = library_skip_reason(missing.value, "check torchao-rowwise")
    assert reason == (
        "needs rocm_validate_absent_library to check torchao-rowwise, found it not installed; "
        "install it with: pip install rocm-validate[fp8]"
    )


@pytest.mark.parametrize(
    "body, error",
    [
        ("import rocm_validate_absent_dependency", ModuleNotFoundError),  # a dependency of the library is missing
        ("raise ImportError('undefined symbol: _ZN3c10')", ImportError),  # an ABI mismatch with this torch
    ],
)
def test_an_installed_library_that_fails_to_import_raises_its_own_error(tmp_path, monkeypatch, body, error):
    package = tmp_path / "broken_fp8_library"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_fp8_library", raising=False)
    with pytest.raises(error) as raised:
        fp8_recipes.import_library("broken_fp8_library")
    assert not isinstance(raised.value, LibraryMissing)


def test_a_missing_submodule_of_an_installed_library_is_not_called_missing(tmp_path, monkeypatch):
    (tmp_path / "partial_fp8_library").mkdir()
    (tmp_path / "partial_fp8_library" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as raised:
        fp8_recipes.import_library("partial_fp8_library.float8")
    assert not isinstance(raised.value, LibraryMissing)


# --- what each recipe needs ---------------------------------------------------------------------


def _device(backend: str, arch: str, runtime: str | None = None) -> DeviceInfo:
    return DeviceInfo(
        backend=backend,
        index=None if backend == "cpu" else 0,
        name="test device",
        arch=arch,
        device_key="k",
        runtime_version=runtime,
        fp8_formats=capabilities.fp8_formats(backend, arch),
        scaled_mm=capabilities.scaled_mm_supported(backend, arch, runtime),
    )


@pytest.mark.parametrize(
    "recipe, device, expected",
    [
        ("torchao-tensorwise", _device("cuda", "sm_90", "13.0"), None),
        ("torchao-rowwise", _device("rocm", "gfx942", "6.4.1"), None),
        ("torchao-rowwise", _device("rocm", "gfx942", "6.3.0"), "torchao-rowwise: needs row-wise _scaled_mm"),
        (
            "torchao-tensorwise",
            _device("rocm", "gfx90a", "7.0"),
            "torchao-tensorwise: needs native FP8, found none on gfx90a",
        ),
        ("te-current", _device("cpu", "cpu"), "te-current: needs a GPU, found cpu"),
        (
            "te-mxfp8",
            _device("rocm", "gfx942", "7.0"),
            "te-mxfp8: needs gfx950 or sm_100 or sm_103 or sm_120 or sm_121, found gfx942",
        ),
        ("te-mxfp8", _device("rocm", "gfx950", "7.0"), None),
        ("project-delayed", _device("cpu", "cpu"), None),
    ],
)
def test_each_recipe_states_what_the_device_lacks(recipe, device, expected):
    reason = fp8_recipe_skip_reason(device, RECIPES[recipe])
    assert reason == expected if expected is None else reason.startswith(expected), reason


def test_unknown_recipes_are_refused_by_name():
    with pytest.raises(ValueError, match="known: torchao-tensorwise"):
        fp8_recipes.fp8_recipe("torchao-delayed")


# --- adapters -----------------------------------------------------------------------------------


def test_the_project_recipe_replaces_every_linear_and_shares_its_parameters():
    block = fp8_recipes.llama_block("decoder", "tiny", "cpu")
    weights = {name: p for name, p in block.named_parameters()}
    assert fp8_recipes.convert(block, RECIPES["project-delayed"], OCP) == 7
    assert all(p is weights[name] for name, p in block.named_parameters())
    assert not any(type(m) is torch.nn.Linear for m in block.modules())


def test_a_parameter_sharing_copy_converts_without_touching_the_original():
    block = fp8_recipes.llama_block("ffn", "tiny", "cpu")
    twin = fp8_recipes.parameter_sharing_copy(block)
    fp8_recipes.convert(twin, RECIPES["project-delayed"], OCP, keep=("block.down_proj",))
    assert all(a is b for a, b in zip(block.parameters(), twin.parameters()))
    assert type(block.block.gate_proj) is torch.nn.Linear and isinstance(twin.block.gate_proj, fp8.Fp8Linear)
    assert type(twin.block.down_proj) is torch.nn.Linear


@pytest.mark.parametrize(
    "variant, forward, gradient",
    [
        ("tensorwise", torch.float8_e4m3fnuz, torch.float8_e5m2fnuz),
        ("rowwise", torch.float8_e4m3fnuz, torch.float8_e4m3fnuz),
    ],
)
def test_torchao_config_casts_to_the_formats_of_the_device(variant, forward, gradient):
    _needs_library("torchao-tensorwise")
    config = fp8_recipes.torchao_config(variant, ("e4m3fnuz", "e5m2fnuz"))
    assert config.cast_config_input.target_dtype == forward
    assert config.cast_config_weight.target_dtype == forward
    assert config.cast_config_grad_output.target_dtype == gradient
    assert config.cast_config_grad_output_for_grad_weight.target_dtype == gradient


def test_a_torchao_recipe_swaps_in_float8_linears_that_share_the_weights():
    _needs_library("torchao-tensorwise")
    block = fp8_recipes.llama_block("ffn", "tiny", "cpu")
    weights = [p for p in block.parameters()]
    assert fp8_recipes.convert(block, RECIPES["torchao-rowwise"], OCP) == 3
    assert {type(m).__name__ for m in block.block.children() if hasattr(m, "weight")} == {"Float8Linear"}
    assert all(a is b for a, b in zip(weights, block.parameters()))


def test_the_fp8_candidate_trains_with_torchao_where_installed_and_the_project_recipe_otherwise(monkeypatch):
    try:
        fp8_recipes.import_library("torchao.float8")
        installed = "torchao-tensorwise"
    except LibraryMissing:
        installed = "project-delayed"
    assert minibert.fp8_training_recipe(torch.device("cpu")).name == installed

    def missing(module: str) -> None:
        raise LibraryMissing(module.split(".")[0])

    monkeypatch.setattr(fp8_recipes, "import_library", missing)
    assert minibert.fp8_training_recipe(torch.device("cpu")).name == "project-delayed"


# --- the worst tile -----------------------------------------------------------------------------


def test_the_worst_tile_is_the_one_that_was_zeroed():
    golden = torch.randn(300, 260, dtype=torch.float64)
    candidate = golden * (1 + 1e-3 * torch.randn_like(golden))
    candidate[128:256, 256:260] = 0  # a ragged edge tile
    rows, cols = checks.worst_tile(golden, candidate)
    assert (rows.start, rows.stop, cols.start, cols.stop) == (128, 256, 256, 260)


def test_a_vector_is_tiled_as_one_row():
    golden = torch.randn(1000, dtype=torch.float64)
    candidate = golden.clone()
    candidate[900] = 0
    rows, cols = checks.worst_tile(golden, candidate)
    assert (rows.start, rows.stop, cols.start, cols.stop) == (0, 1, 896, 1000)


# --- negative controls: the recipe checks on the CPU ----------------------------------------------


@pytest.mark.parametrize("kind", fp8_recipes.BLOCKS)
@pytest.mark.parametrize("recipe", CPU_RECIPES)
def test_a_healthy_recipe_passes_every_gate(recipe, kind):
    case = _case(recipe, kind)
    results = checks.check_recipe_block(case, CPU, "cpu")
    results.append(checks.check_recipe_training(case, CPU, "cpu"))
    assert [r.message() for r in results if not r.passed] == []


@pytest.mark.parametrize("kind", fp8_recipes.BLOCKS)
@pytest.mark.parametrize("recipe", CPU_RECIPES)
def test_a_zeroed_gradient_tile_fails_that_gradients_tile_gate(recipe, kind):
    case = _case(recipe, kind)
    name, _ = fp8_recipes.first_weight(fp8_recipes.llama_block(kind, "tiny", "cpu"))
    failed = [r for r in checks.check_recipe_block(case, CPU, "cpu", fault="zeroed-grad-tile") if not r.passed]
    tile = f"fp8_recipe.{kind}.tile [{case.label}: grad.{name} worst tile, rows 0:128 cols 0:128]"
    assert tile in [r.check for r in failed]
    assert all(name in r.check for r in failed), [r.check for r in failed]
    assert "SQNR 0.0 dB is below the required" in next(r for r in failed if r.check == tile).message()


@pytest.mark.parametrize("recipe", CPU_RECIPES)
def test_a_weight_scale_off_by_two_fails_the_output_and_every_gradient(recipe):
    case = _case(recipe)
    results = checks.check_recipe_block(case, CPU, "cpu", fault="weight-scale-x2")
    assert not any(r.passed for r in results), [r.check for r in results if r.passed]


@pytest.mark.parametrize("kind", fp8_recipes.BLOCKS)
def test_an_output_off_by_eight_percent_fails_the_loss_check(kind):
    case = _case("project-delayed", kind)
    result = checks.check_recipe_training(case, CPU, "cpu", fault="output-x0.92")
    assert not result.passed and "differs from the golden beyond tolerance" in result.message()


def test_a_planted_wrong_scale_is_removed_afterwards():
    original = fp8.ScalingState.cast
    with fp8_recipes.wrong_weight_scale(RECIPES["project-delayed"]):
        assert fp8.ScalingState.cast is not original
    assert fp8.ScalingState.cast is original
    with pytest.raises(ValueError, match="not te-current"), fp8_recipes.wrong_weight_scale(RECIPES["te-current"]):
        pass


# --- floors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("part", ["out", "grad_input", "grad_weight", "tile", "loss"])
@pytest.mark.parametrize("kind", fp8_recipes.BLOCKS)
def test_every_recipe_check_has_a_floor_measured_on_the_h100_that_one_recipe_can_override(kind, part):
    check = f"fp8_recipe.{kind}.{part}"
    general = tolerance_for(check, "rocm", "gfx942", "torchao-rowwise")
    assert "H100" in general.source
    own = Rule(check, Tolerance(k=None, min_sqnr_db=30.0, source="measured"), library="torchao-rowwise")
    assert tolerance_for(check, "rocm", "gfx942", "torchao-rowwise", rules=[own]).min_sqnr_db == 30.0
    assert tolerance_for(check, "rocm", "gfx942", "torchao-tensorwise", rules=[own]) == general
