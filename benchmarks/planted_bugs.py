"""Bugs planted in the stack, and the suite run against each: the proof, on any device, that the
correctness suite fails when a kernel is wrong.

    python benchmarks/planted_bugs.py [--device 0|cpu] [--out planted.json] [NAME ...]

Each bug replaces one function (a torch op, a method, the project's FP8 GEMM) through a pytest
plugin for the whole run, in a subprocess of the real suite with this repository as rootdir. The
report lists, per bug, the suite file and tests it ran, how many failed and in which category,
and whether the run said so in the numerics category: a bug reported green, or whose tests all
skip, is a miss. A bug whose path exists only on some platforms (`needs`) is not planted elsewhere
and is listed as such. The plugin
sources are also what `tests/test_correctness_negative_controls.py` runs on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "correctness"


def wrong_plugin(module: str, attribute: str, wrong: str) -> str:
    """Source of a plugin whose autouse fixture replaces `module.attribute` by the function
    `wrong` (given as source; it may call `original`) for every test of the run. `module` may
    name an object inside a module after a colon ('torch:Tensor')."""
    path, _, inner = module.partition(":")
    return f"""
import importlib, pytest, torch
target = importlib.import_module("{path}")
{f'target = getattr(target, "{inner}")' if inner else ""}


@pytest.fixture(autouse=True)
def deliberately_wrong_implementation(monkeypatch):
    original = getattr(target, "{attribute}")
{textwrap.indent(textwrap.dedent(wrong), "    ")}
    monkeypatch.setattr(target, "{attribute}", wrong)
"""


# Fused SDPA reads a non-contiguous V as if it were contiguous (the class of ROCm/pytorch#3230).
WRONG_SDPA = wrong_plugin(
    "torch.nn.functional",
    "scaled_dot_product_attention",
    """
    def wrong(query, key, value, *args, **kwargs):
        if not torch.backends.cuda.math_sdp_enabled() and not value.is_contiguous():
            value = value.as_strided(value.shape, torch.empty(value.shape).stride(), value.storage_offset())
        return original(query, key, value, *args, **kwargs)
""",
)

WRONG_SCALED_MM = wrong_plugin(
    "torch",
    "_scaled_mm",
    """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        return (out.float() * 1.02).to(out.dtype)
""",
)

WRONG_FUSED_ADAMW = wrong_plugin(
    "torch",
    "_fused_adamw_",
    """
    def wrong(*args, **kwargs):
        kwargs["lr"] = kwargs["lr"] * 1.01
        return original(*args, **kwargs)
""",
)

# The FP8 GEMM of the reference recipe drops the dequantization scale of its second operand.
WRONG_FP8_LINEAR = wrong_plugin(
    "rocm_validate.workloads.fp8",
    "fp8_mm",
    """
    def wrong(a, b, a_scale_inv, b_scale_inv, *args, **kwargs):
        return original(a, b, a_scale_inv, torch.ones_like(b_scale_inv), *args, **kwargs)
""",
)

# A bf16 GEMM whose epilogue truncates to bf16 instead of rounding: every element within one ulp.
WRONG_GEMM_TRUNCATES = wrong_plugin(
    "torch.nn.functional",
    "linear",
    """
    def wrong(x, weight, bias=None):
        out = original(x, weight, bias)
        if out.dtype != torch.bfloat16:
            return out
        exact = original(x.float(), weight.float(), None if bias is None else bias.float())
        return (exact.contiguous().view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
""",
)

# The float -> E4M3 cast rounds one ulp towards zero on every odd pattern (a rounding-mode bug).
WRONG_FP8_CAST = wrong_plugin(
    "torch:Tensor",
    "to",
    """
    def wrong(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if out.dtype == torch.float8_e4m3fn and self.dtype in (torch.float32, torch.bfloat16):
            bits = out.view(torch.uint8)
            odd = (bits & 1).bool() & ((bits & 0x7F) != 0x7F)
            out = torch.where(odd, bits - 1, bits).view(torch.float8_e4m3fn)
        return out
""",
)

# The FP8 weight-gradient GEMM loses one tile: 1/256 of grad_weight (16 x 8 of the CPU's 256 x 128,
# 256 x 64 of the GPU's 4096 x 1024: the shapes of rocm_validate.correctness.fp8.linear_size).
WRONG_FP8_TILE = wrong_plugin(
    "rocm_validate.workloads.fp8",
    "fp8_mm",
    """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        if tuple(out.shape) in ((256, 128), (4096, 1024)):
            out = out.clone()
            out[: out.shape[0] // 16, : out.shape[1] // 16] = 0
        return out
""",
)

# Inductor's compiled layers return outputs 1e-4 too large.
WRONG_COMPILE = wrong_plugin(
    "torch",
    "compile",
    """
    def wrong(module, *args, **kwargs):
        compiled = original(module, *args, **kwargs)

        def call(*inputs, **named):
            out = compiled(*inputs, **named)
            return tuple(o * (1 + 1e-4) for o in out) if isinstance(out, tuple) else out * (1 + 1e-4)
        return call
""",
)

# Fused attention (not the math reference) returns 5% too much under autocast. (The layer's
# LayerNorm absorbs most of a 2% error in its output; the attention gradients still show 5%.)
WRONG_FUSED_ATTENTION = wrong_plugin(
    "torch.nn.functional",
    "scaled_dot_product_attention",
    """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        return out * 1.05 if torch.backends.cuda.flash_sdp_enabled() else out
""",
)

# The three bugs the suite once reported green (issue: correctness against the truth): a
# normalization kernel 0.1% too large in every precision below float64, the exact GELU computed
# with the tanh approximation, and Inductor-compiled modules leaning 0.2% high.
WRONG_LAYER_NORM_SCALE = wrong_plugin(
    "torch.nn.functional",
    "layer_norm",
    """
    def wrong(x, *args, **kwargs):
        out = original(x, *args, **kwargs)
        if out.dtype == torch.float64:
            return out
        up = [a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
        return (original(x.float(), *up, **kwargs) * 1.001).to(out.dtype)
""",
)

WRONG_GELU_APPROXIMATION = wrong_plugin(
    "torch.nn.functional",
    "gelu",
    """
    def wrong(x, approximate="none"):
        return original(x, approximate="tanh")
""",
)

WRONG_COMPILE_LEAN = wrong_plugin(
    "torch",
    "compile",
    """
    def wrong(module, *args, **kwargs):
        compiled = original(module, *args, **kwargs)

        def lean(out):
            if torch.is_tensor(out):
                return (out.double() * 1.002).to(out.dtype)
            if isinstance(out, tuple):
                return tuple(lean(o) for o in out)
            if hasattr(out, "items"):  # a transformers ModelOutput: every tensor it holds
                return type(out)(**{key: lean(value) for key, value in out.items()})
            return out

        def call(*inputs, **named):
            return lean(compiled(*inputs, **named))
        return call
""",
)


# The BLAS-Lt GELU epilogue computing the other GELU: the exact one where the tanh approximation is
# claimed (GPUs), the tanh approximation where the exact one is (the CPU).
WRONG_EPILOGUE_GELU = wrong_plugin(
    "torch",
    "_addmm_activation",
    """
    def wrong(bias, x, w, *args, use_gelu=False, **kwargs):
        if not use_gelu:
            return original(bias, x, w, *args, use_gelu=use_gelu, **kwargs)
        z = torch.addmm(bias, x, w)
        return torch.nn.functional.gelu(z.float(), approximate="none" if z.is_cuda else "tanh").to(z.dtype)
""",
)

# A fused attention kernel that reads a boolean mask one token off: every query also sees the key
# just before it, so the first token of each packed sequence sees the previous sequence's last.
WRONG_PACKED_MASK = wrong_plugin(
    "torch.nn.functional",
    "scaled_dot_product_attention",
    """
    def wrong(query, key, value, attn_mask=None, *args, **kwargs):
        if attn_mask is not None and attn_mask.dtype == torch.bool and not torch.backends.cuda.math_sdp_enabled():
            below = torch.ones(attn_mask.shape[-1] - 1, dtype=torch.bool, device=attn_mask.device).diag(-1)
            attn_mask = attn_mask | below
        return original(query, key, value, attn_mask, *args, **kwargs)
""",
)

# TunableOp selects a solution 1% off (computed in float32, scaled, rounded once) for every linear
# layer it runs; the default path stays right.
WRONG_TUNED_SOLUTION = wrong_plugin(
    "torch.nn.functional",
    "linear",
    """
    def wrong(x, weight, bias=None):
        out = original(x, weight, bias)
        if not (x.is_cuda and torch.cuda.tunable.is_enabled()):
            return out
        exact = original(x.float(), weight.float(), None if bias is None else bias.float())
        return (exact * 1.01).to(out.dtype)
""",
)


# --- precision loss (issue 35): right on average, but a correct kernel's error norm is exceeded ---
# A narrow sum: operands in `dtype`, every addition of a tree rounded to it (a reduction whose
# accumulator is the narrow type). Shared by the plants below as source text.
NARROW_SUM = """
    def narrow_sum(t, dtype, dim=-1):
        t = t.to(dtype).movedim(dim, -1)
        while t.shape[-1] > 1:
            if t.shape[-1] % 2:
                t = torch.cat([t, torch.zeros_like(t[..., :1])], -1)
            t = t[..., 0::2] + t[..., 1::2]
        return t[..., 0].float()
"""


def split_k_plugin(dtype: str) -> str:
    """A split-K `dtype` GEMM (K in slices of 64, each in float32) whose partial sums are reduced in
    `dtype`: a BLAS library's split-K with a workspace in the output type."""
    return wrong_plugin(
        "torch.nn.functional",
        "linear",
        NARROW_SUM
        + f"""
    def wrong(x, weight, bias=None):
        if x.dtype != torch.{dtype} or x.shape[-1] < 128:
            return original(x, weight, bias)
        parts = [original(a.float(), w.float()) for a, w in zip(x.split(64, -1), weight.split(64, -1))]
        out = narrow_sum(torch.stack(parts, -1), torch.{dtype})
        return (out if bias is None else out + bias.float()).to(torch.{dtype})
""",
    )


WRONG_SPLIT_K_BF16 = split_k_plugin("bfloat16")
# fp16 GEMMs run on GPUs only (the CPU runs no fp16 GEMMs)
WRONG_SPLIT_K_FP16 = split_k_plugin("float16")

# Softmax whose row sum is accumulated in bf16 (the exponentials in float32, their sum a bf16 tree).
WRONG_SOFTMAX_BF16_SUM = wrong_plugin(
    "torch.nn.functional",
    "softmax",
    NARROW_SUM
    + """
    def wrong(x, dim=None, *args, **kwargs):
        if x.dtype == torch.float64:
            return original(x, dim, *args, **kwargs)
        e = (x.float() - x.float().amax(dim, keepdim=True)).exp()
        return (e / narrow_sum(e, torch.bfloat16, dim).unsqueeze(dim)).to(x.dtype)
""",
)

# LayerNorm whose mean and variance are accumulated in bf16.
WRONG_LAYER_NORM_BF16_STATS = wrong_plugin(
    "torch.nn.functional",
    "layer_norm",
    NARROW_SUM
    + """
    def wrong(x, shape, weight=None, bias=None, eps=1e-5):
        if x.dtype == torch.float64:
            return original(x, shape, weight, bias, eps)
        n = x.shape[-1]
        mean = narrow_sum(x, torch.bfloat16).unsqueeze(-1) / n
        var = narrow_sum((x.float() - mean) ** 2, torch.bfloat16).unsqueeze(-1) / n
        out = (x.float() - mean) * torch.rsqrt(var + eps)
        out = out if weight is None else out * weight.float()
        return (out if bias is None else out + bias.float()).to(x.dtype)
""",
)

# Fused attention that keeps its running output in bf16: keys in blocks of 64, each block's
# P V in float32, the blocks' sum rounded to bf16 after every block (the math reference is exact).
WRONG_SDPA_BF16_ACCUMULATOR = wrong_plugin(
    "torch.nn.functional",
    "scaled_dot_product_attention",
    """
    def wrong(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        if torch.backends.cuda.math_sdp_enabled() or query.dtype == torch.float64:
            return original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, **kwargs)
        q, k, v = query.float(), key.float(), value.float()
        s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else q.shape[-1] ** -0.5)
        if is_causal:
            keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
            s = s.masked_fill(~keep, float("-inf"))
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
        p = (s - s.amax(-1, keepdim=True)).exp()
        out = torch.zeros(q.shape[:-1] + v.shape[-1:], device=q.device, dtype=torch.bfloat16)
        for j in range(0, k.shape[-2], 64):
            out = out + (p[..., j : j + 64] @ v[..., j : j + 64, :]).to(torch.bfloat16)
        return (out.float() / p.sum(-1, keepdim=True)).to(query.dtype)
""",
)


@dataclass(frozen=True)
class PlantedBug:
    """A bug, the suite file that must catch it and the tests of that file to run."""

    name: str
    plugin: str
    suite_file: str
    keyword: str
    needs: str = ""  # "rocm": only a ROCm build has its path (TunableOp); "gpu": any GPU (fp16 GEMMs)


BUGS = (
    PlantedBug("sdpa-transposed-v", WRONG_SDPA, "test_sdpa.py", "v-transposed"),
    PlantedBug("scaled-mm-2-percent", WRONG_SCALED_MM, "test_fp8_gemm.py", "test_scaled_mm_matches_the_emulation"),
    PlantedBug("fused-adamw-lr", WRONG_FUSED_ADAMW, "test_optimizers.py", "fused"),
    PlantedBug("fp8-linear-scale", WRONG_FP8_LINEAR, "test_fp8_linear.py", "test_reference_fp8_linear_tracks"),
    PlantedBug("bf16-gemm-truncates", WRONG_GEMM_TRUNCATES, "test_gemm.py", "test_linear_layer and bfloat16"),
    PlantedBug("fp8-cast-rounding", WRONG_FP8_CAST, "test_fp8_casts.py", "test_casts_round_to_nearest_even"),
    PlantedBug("fp8-tile", WRONG_FP8_TILE, "test_fp8_linear.py", "test_reference_fp8_linear_tracks"),
    PlantedBug("compiled-1e-4", WRONG_COMPILE, "test_compiled.py", "layer_norm_gelu"),
    PlantedBug("fused-attention-5-percent", WRONG_FUSED_ATTENTION, "test_layers.py", "autocast"),
    PlantedBug("layer-norm-0.1-percent", WRONG_LAYER_NORM_SCALE, "test_blocks.py", "layer_norm"),
    PlantedBug("gelu-tanh-for-erf", WRONG_GELU_APPROXIMATION, "test_blocks.py", "gelu and not tanh"),
    PlantedBug("compiled-lean-0.2-percent", WRONG_COMPILE_LEAN, "test_compiled.py", "compiled"),
    PlantedBug("epilogue-other-gelu", WRONG_EPILOGUE_GELU, "test_epilogues.py", "addmm_gelu"),
    PlantedBug("packed-mask-one-token-off", WRONG_PACKED_MASK, "test_packed_attention.py", "mask"),
    PlantedBug("tunableop-solution-1-percent", WRONG_TUNED_SOLUTION, "test_tunable.py", "selected", needs="rocm"),
    PlantedBug("split-k-reduced-in-bf16", WRONG_SPLIT_K_BF16, "test_gemm.py", "test_linear_layer and bfloat16"),
    PlantedBug("fp16-gemm-reduced-in-fp16", WRONG_SPLIT_K_FP16, "test_gemm.py", "test_linear_layer and float16", "gpu"),
    PlantedBug("softmax-sum-in-bf16", WRONG_SOFTMAX_BF16_SUM, "test_blocks.py", "softmax and not log"),
    PlantedBug(
        "layer-norm-stats-in-bf16", WRONG_LAYER_NORM_BF16_STATS, "test_blocks.py", "layer_norm and not residual"
    ),
    PlantedBug("sdpa-output-accumulated-in-bf16", WRONG_SDPA_BF16_ACCUMULATOR, "test_sdpa.py", "test_sdpa_backend"),
)


def plantable(bug: PlantedBug, here: str) -> bool:
    """Whether the bug's path exists on this platform ('cpu', 'cuda' or 'rocm')."""
    return not bug.needs or bug.needs == here or (bug.needs == "gpu" and here != "cpu")


def run_with(bug: PlantedBug, device: str, workdir: Path) -> dict[str, object]:
    """The suite file's selected tests with the bug planted: outcome counts and categories."""
    plugin = f"planted_{re.sub(r'[^a-z0-9]', '_', bug.name)}"
    (workdir / f"{plugin}.py").write_text(bug.plugin)
    report = workdir / f"{plugin}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(workdir), str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE / bug.suite_file),
        "-p",
        plugin,
        "--rootdir",
        str(REPO),
        "-p",
        "no:cacheprovider",
        f"--rocm-device={device}",
        "-k",
        bug.keyword,
        "-q",
        f"--rocm-report={report}",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    counts = {"failed": 0, "passed": 0, "skipped": 0}
    categories: dict[str, int] = {}
    if report.exists():
        for test in json.loads(report.read_text())["tests"]:
            counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
            if test.get("category"):
                categories[test["category"]] = categories.get(test["category"], 0) + 1
    caught = counts["failed"] > 0 and set(categories) <= {"numerics"}
    return {
        "suite": bug.suite_file,
        "keyword": bug.keyword,
        "exit": done.returncode,
        **counts,
        "categories": categories,
        "caught": caught,
    }


def platform(device: str) -> str:
    """'cpu', 'rocm' or 'cuda': what --rocm-device names on this machine's torch build."""
    if device == "cpu":
        return "cpu"
    import torch

    return "rocm" if torch.version.hip else "cuda"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="bugs to plant (default: all)")
    parser.add_argument("--device", default="cpu", help="the --rocm-device to run on (default cpu)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    here = platform(args.device)
    named = [bug for bug in BUGS if not args.names or bug.name in args.names]
    for bug in named:
        if not plantable(bug, here):
            print(f"{bug.name:28} not planted: its path needs a {bug.needs} build, this is {here}")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for bug in named:
            if not plantable(bug, here):
                continue
            results[bug.name] = run_with(bug, args.device, Path(folder))
            row = results[bug.name]
            verdict = "caught" if row["caught"] else "MISSED"
            print(f"{bug.name:32} {verdict:7} failed {row['failed']:3} passed {row['passed']:3} {row['categories']}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0 if all(row["caught"] for row in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
