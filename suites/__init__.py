"""The rocm-validate suites: preflight, correctness, perf and convergence, one folder each."""
