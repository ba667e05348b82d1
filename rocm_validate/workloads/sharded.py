"""Training steps over a process group: the Llama decoder sharded with PyTorch's FSDP2
(`fully_shard` per decoder layer, then the root; bf16 parameters and fp32 gradient reduction in
mixed precision), BERT replicated with DistributedDataParallel (gradient buckets, fused AdamW,
bf16 autocast), as torchtitan and MLPerf's BERT run them, and MLPerf llama2_70b_lora's shape: a
frozen bf16 Llama-2-70B-wide base with peft's LoRA adapters on the attention, sharded. The sharded
Llama can train with torchao's Float8 linears and FP8 all-gather, as torchtitan's Float8 runs do.

A step here is what each rank runs: forward on its own slice of the global batch, backward (the
reduce-scatter of FSDP or the bucketed all-reduce of DDP averages the gradients over the group),
and the optimizer on its shard. `world_of_one` gives each rank a group of its own, so the same
code is the one-GPU step the scaling efficiency and the parity check compare with.

`gradient_fingerprint` projects every gradient onto a fixed random direction (float64 sums):
two computations of the same micro-batch's gradient agree to rounding, and one rank's wrong
gradient stands out against a peer's computation of the same micro-batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rocm_validate.workloads import fp8_recipes
from rocm_validate.workloads.models import ModelBuild, build_model


@dataclass
class ShardedStep:
    """A model wrapped for the group, its optimizer, and the loss scale a planted fault sets."""

    build: ModelBuild
    model: Any
    optimizer: Any
    autocast: bool  # DDP steps under bf16 autocast; FSDP's mixed precision casts the parameters itself
    loss_scale: float = 1.0  # a planted fault: this rank's gradient off by this factor
    after_optimizer: Callable[[Any], None] | None = None  # run on the model after each optimizer step

    def loss(self, batch: dict[str, Any]) -> Any:
        device_type = self.build.device.type
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=self.autocast):
            return self.model(**batch).loss

    def step(self, batch: dict[str, Any]) -> Any:
        """Forward, backward (the group's gradient reduction) and the optimizer; the detached loss."""
        loss = self.loss(batch)
        (loss * self.loss_scale if self.loss_scale != 1.0 else loss).backward()
        self.optimizer.step()
        if self.after_optimizer is not None:
            self.after_optimizer(self.model)
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()


def world_of_one() -> Any:
    """A process group holding this rank alone (every rank must call it, in the same order)."""
    mine, _ = dist.new_subgroups(group_size=1)
    return mine


def mesh_of(group: Any, device: torch.device) -> Any:
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(group, device.type)


def fully_sharded(model: Any, mesh: Any, mixed: bool, layers: Any = None) -> Any:
    """FSDP2 over `mesh`: each decoder layer (`layers`, by default the model's) its own unit, then
    the root (embeddings, norm, head); bf16 parameters with fp32 gradient reduction when `mixed`."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
    kwargs: dict[str, Any] = {"mesh": mesh} | ({"mp_policy": policy} if policy else {})
    for layer in model.model.layers if layers is None else layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def sharded_llama(
    scale: str,
    layers: int,
    seq_len: int,
    device: torch.device,
    group: Any,
    mixed: bool,
    optimizer: str = "adamw",
    attn_implementation: str = "sdpa",
    float8: tuple[str, ...] = (),
) -> ShardedStep:
    """The Llama-3.1-8B-shaped decoder (`scale` full: width 4096, GQA 32/8, SwiGLU 14336, vocabulary
    128256), `layers` deep, sharded over `group`, seeded alike on every rank; with `float8` (the
    device's FP8 formats) each decoder layer trains with torchao's Float8 linears (`float8_layers`)."""
    build = build_model(
        "llama-3.1-8b",
        scale,
        device=device,
        num_layers=layers,
        seq_len=seq_len,
        attn_implementation=attn_implementation,
    )
    model = build.model.train()
    after_optimizer = float8_layers(model, float8) if float8 else None
    model = fully_sharded(model, mesh_of(group, device), mixed)
    return ShardedStep(
        build, model, _optimizer(model.parameters(), optimizer, device), autocast=False, after_optimizer=after_optimizer
    )


# torchao's tensor-wise recipe, the only scaling FSDP2's FP8 all-gather supports, as the node's step
# runs it: on GPUs (on the CPU torchao's FP8 matmuls are emulated: a tiny 2-layer step took 22 s).
FLOAT8_RECIPE = dataclasses.replace(
    fp8_recipes.RECIPES["torchao-tensorwise"], name="torchao-tensorwise with FP8 all-gather", needs_gpu=True
)


def float8_layers(model: Any, formats: tuple[str, ...]) -> Callable[[Any], None]:
    """Turn every decoder layer of a Llama model into torchao Float8 training before it is sharded,
    as torchtitan's Float8 converter does: each nn.Linear of the layer a Float8Linear (dynamic
    tensor-wise scaling in the device's `formats`) whose weight FSDP2 casts to FP8 before its
    all-gather (`enable_fsdp_float8_all_gather`); the output layer (`lm_head`, outside the layers)
    stays in high precision, as FP8 recipes keep it. Each layer is then put under torch.compile,
    which fuses the casts and the amax reductions the eager Float8 step spends its gain on (torchao
    and torchtitan: compile is required for competitive performance; torchtitan's published 8B
    Float8 figure is compiled); the KV cache is switched off, since its per-layer index would
    make the compiler recompile for every layer. Returns what to run after each optimizer step:
    torchao's `precompute_float8_dynamic_scale_for_fsdp`, the weights' FP8 scales for the next
    all-gathers computed in one all-reduce. LibraryMissing without torchao."""
    float8 = fp8_recipes.import_library("torchao.float8")
    config = dataclasses.replace(
        fp8_recipes.torchao_config(FLOAT8_RECIPE.variant, formats), enable_fsdp_float8_all_gather=True
    )
    model.config.use_cache = False
    blocks = model.model.layers
    for index, layer in enumerate(blocks):
        float8.convert_to_float8_training(layer, config=config)
        blocks[index] = torch.compile(layer)
    precompute: Callable[[Any], None] = float8.precompute_float8_dynamic_scale_for_fsdp
    return precompute


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # MLPerf llama2_70b_lora: the attention projections


def lora_llama(scale: str, layers: int, seq_len: int, device: torch.device, group: Any) -> ShardedStep:
    """MLPerf llama2_70b_lora's step shape: the Llama-2-70B decoder (`scale` full: width 8192, GQA
    64/8), `layers` deep, its base frozen in bf16, LoRA adapters (rank 16, alpha 32, peft) on the
    attention projections, sharded with FSDP2 over `group`; AdamW over the adapters alone.
    ImportError without peft."""
    import peft

    build = build_model("llama-2-70b", scale, device=device, dtype=torch.bfloat16, num_layers=layers, seq_len=seq_len)
    config = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=list(LORA_TARGETS))
    model = peft.get_peft_model(build.model.train(), config)
    inner: Any = model.get_base_model()
    wrapped = fully_sharded(model, mesh_of(group, device), mixed=True, layers=inner.model.layers)
    trainable = [p for p in wrapped.parameters() if p.requires_grad]
    return ShardedStep(build, wrapped, _optimizer(trainable, "adamw", device), autocast=False)


def replicated_bert(scale: str, device: torch.device, group: Any, bucket_mb: float = 25.0) -> ShardedStep:
    """MLPerf's BERT-L (`scale` full) replicated over `group` with DDP's gradient buckets, fused AdamW."""
    from torch.nn.parallel import DistributedDataParallel

    build = build_model("bert-large", scale, device=device)
    ids = [device.index] if device.type == "cuda" else None
    model = DistributedDataParallel(build.model.train(), device_ids=ids, process_group=group, bucket_cap_mb=bucket_mb)
    return ShardedStep(build, model, _optimizer(model.parameters(), "adamw", device), autocast=True)


def _optimizer(parameters: Any, name: str, device: torch.device) -> Any:
    """Fused AdamW on a GPU (foreach on the CPU); plain SGD for the parity check, whose error
    model is linear in the gradient (AdamW's first step is lr x sign(g), which turns a rounding
    difference in a near-zero gradient into a whole step)."""
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=0.05)
    return torch.optim.AdamW(parameters, lr=1e-4, fused=device.type == "cuda")


def local(tensor: Any) -> Any:
    """A DTensor's local shard, or the tensor itself."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def full(tensor: Any) -> Any:
    """A DTensor gathered whole (a collective: every rank of its mesh calls it), or the tensor."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def gradient_fingerprint(step: ShardedStep, batch: dict[str, Any], seed: int = 1234) -> list[float]:
    """One float64 number per parameter: its gradient on `batch` (scaled by the step's planted
    factor) projected on a random direction fixed by `seed`; the gradients are cleared after."""
    loss = step.loss(batch)
    (loss * step.loss_scale).backward()
    prints = []
    generator = torch.Generator().manual_seed(seed)
    for _, parameter in sorted(step.model.named_parameters()):
        grad = full(parameter.grad).double().cpu()
        direction = torch.randn(grad.shape, generator=generator, dtype=torch.float64)
        prints.append(float((grad * direction).sum()))
    step.optimizer.zero_grad(set_to_none=True)
    return prints


def parameters_whole(step: ShardedStep) -> dict[str, Any]:
    """Every parameter gathered whole, on the CPU in float64 (collective for a sharded model)."""
    return {name: full(p.detach()).double().cpu() for name, p in sorted(step.model.named_parameters())}


def slice_of(batch: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """This rank's rows of a global batch (every key shares the batch dimension)."""
    rows = next(iter(batch.values())).shape[0]
    if rows % world:
        raise ValueError(f"a global batch of {rows} rows does not divide over {world} ranks")
    part = rows // world
    return {key: value[rank * part : (rank + 1) * part] for key, value in batch.items()}


def timed_steps(
    step: Callable[[], Any], warmup: int, steps: int, sync: Callable[[], None], clock: Callable[[], float]
) -> list[float]:
    """Seconds of each of `steps` steps after `warmup` steps, each step synchronised."""
    for _ in range(warmup):
        step()
    sync()
    seconds = []
    for _ in range(steps):
        start = clock()
        step()
        sync()
        seconds.append(clock() - start)
    return seconds


def relative_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """||a - b|| / ||b|| (0 when both are zero)."""
    diff = sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5
    norm = sum(y * y for y in b) ** 0.5
    return diff / norm if norm else (0.0 if diff == 0 else float("inf"))
