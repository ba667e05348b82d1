"""The rocm-validate suites: correctness, perf and convergence, one folder each."""
