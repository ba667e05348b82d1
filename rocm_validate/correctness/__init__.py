"""The correctness suite's checks: compare (the one comparator) and tolerances (the one table,
every number with its source), with one module per family of checks: attention (SDPA), gemm
and blas (dense GEMMs per BLAS library), fp8 (casts, `_scaled_mm`, FP8 linears), layers
(compiled and autocast layers), graphs (graph replay), optimizers and optim_reference (fused
AdamW and LAMB against a float64 reference)."""
