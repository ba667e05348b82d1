"""The `rocm-validate` command: main (the parser, exit codes and `devices`), mlperf_score (`mlperf-score`)."""
