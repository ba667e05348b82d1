"""The `rocm-validate` command: main (the parser and exit codes), devices (`devices`, live or `--from` saved
tool outputs), bundle (`bundle`: save a node's tool outputs), mlperf_score (`mlperf-score`), fleet
(`fleet`: merge the node reports of a rollout)."""
