"""The perf suite: plugin (its options, the `perf` fixture, outcomes), recorder (measure, build
and gate metrics), timing (warm-up, rounds, device-side timing), stats (noise of a window), gate
(thresholds and verdicts; its rules name the metric families), floors (per-SKU floors),
attribution (a regression's cause: contention, throttling, the stack), baselines (the per-device
baseline store), kernels (GEMM operands and calls), benchmark_json (pytest-benchmark export),
tuning (TunableOp's tuned GEMMs timed against the default)."""
