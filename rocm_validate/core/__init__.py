"""The pytest machinery every suite shares, torch-free at import.

options (the option machinery every suite plugin uses, typed parsers, the run-wide settings),
suites (the suites, and which suite a test belongs to), levels (test levels, timeouts),
plan (the run plan every module reads: devices, this process's device, a whole-node run's
pinning and lanes, the level's budget), session (run state in config.stash), commands (every
command a run prints), requirements (markers and every need-vs-found skip reason), fixtures (rocm_device, torch_device,
model_builder, record_rocm_metric), oom (the one out-of-memory path), watchdog (ends a plain run
stuck in native code), header (what the run validates and how to repeat it), collector (outcomes
and metrics into the table and the JSON report), outputs (the report, summary, JUnit and
benchmark files: claimed at the start, written whole at the end, a stopped run said in the
summary), interruption (Ctrl-C and SIGTERM end a run interrupted, never with a test counted
passed), categorize (each failure's triage category), hookspec (the hooks other plugins
implement), compile_cache (torch.compile's caches, shared by a run's workers and kept
between runs), tunableop_file (the TunableOp results file a run names, and its fixtures), known_defects
(--rocm-known-defects: a failure of a tracked stack defect reported as known-defect), process_exit
(os._exit in a test, a test file's import or a collection hook never ends the run green).
"""
