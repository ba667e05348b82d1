"""The correctness suite's checks: compare (the one comparator), tolerances (the one table, every
number with its source) and error_model (what correct arithmetic in a precision can do), with one
module per family of checks: attention (SDPA kernels), gemm and blas (dense GEMMs per BLAS
library), fp8 (casts, `_scaled_mm`, FP8 linears and recipes), blocks (the building blocks of
BERT-L and Llama), layers (compiled and autocast layers), graphs (graph replay), optimizers and
optim_definitions (AdamW and LAMB as defined: the golden in float64, the reference in low precision), repeatability (bit-for-bit
repeats under sustained load, memory patterns), tunable (every solution TunableOp selects, and a
user's results file), epilogues (fused GEMM epilogues with the GELU each claims), packed
(attention over packed sequences, each sequence against its own golden), reductions (adversarial
inputs whose exact result exposes a reduction held in the output's type). Every check takes the device's `DeviceInfo`
and its torch device: `check_x(..., device, torch_device)`."""
