"""The correctness suite's checks: compare (the one comparator), error_model (what correct
arithmetic in a precision can do: every row's absolute bound against float64) and tolerances (the
one table, every number with its source), with one module per family of checks: blocks (the
building blocks against their float64 definitions), attention (SDPA), gemm and blas (dense GEMMs
per BLAS library), fp8 (casts, `_scaled_mm`, FP8 linears), layers (compiled and autocast layers),
graphs (graph replay), optimizers and optim_reference (fused AdamW and LAMB against a float64
reference), repeatability (sustained-load repeats, memory patterns)."""
