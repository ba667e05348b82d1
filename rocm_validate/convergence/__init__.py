"""The convergence suite: plugin (its options, fixtures, progress, the RCP record command), mlperf
(MLLOG files and mlperf-logging's RCP checker), mlperf_benchmarks (what each MLPerf benchmark
counts and evaluates), check (the convergence gate and the mini-BERT check), minibert (the
built-in RCP benchmark), rcps (its reference convergence points)."""
