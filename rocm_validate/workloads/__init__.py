"""The work the suites run: models (real transformers architectures from configs, random
init), shapes (the one registry of GEMM and attention shapes), fp8 (FP8 formats and the
delayed-scaling FP8 linear recipe), fp8_recipes (FP8 training recipes as users run them: torchao,
Transformer Engine), training (a timed training step), sharded (training steps over a process group: FSDP2, DDP), packing (sequences packed into blocks),
tunableop (switching PyTorch TunableOp on and off), tunableop_results (its results files)."""
