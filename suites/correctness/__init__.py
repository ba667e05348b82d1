"""Correctness: fused and FP8 kernels against a float64 golden."""
