"""The perf suite: plugin (options, the `perf` fixture, outcomes), recorder (measure, build
and gate metrics), timing (warm-up, rounds, device-side timing), stats (noise of a window), gate
(thresholds and verdicts), baselines (the per-device baseline store), kernels (GEMM operands and
calls), benchmark_json (pytest-benchmark export)."""
