"""The pytest machinery every suite shares, torch-free at import.

options (every suite's options, resolved once), session (run state in config.stash), selection
(which suite a test belongs to), requirements (markers and every need-vs-found skip reason),
fixtures (rocm_device, torch_device, model_builder, record_rocm_metric), oom (the one
out-of-memory path), header (what the run validates and how to repeat it), collector (outcomes
and metrics into the table and the JSON report), hookspec (the hooks other plugins implement).
"""
