"""What a run produces, torch-free: metrics (a measurement, its `Verdict` and the perf gate's
`GateRecord`), margins (a correctness check's margins against its bounds), report (the
metrics table, the JSON report and its schemas, device summaries), jsonfile (schema-checked,
atomically written JSON), triage (failure categories and the verdict line), peers (each GPU
against its peers), summary (markdown, HTML and the node table), plots (the summary's plots),
sizes (message sizes: one format for the collectives and the gate), known_defects (the known-defects
tables' schema, loader and matching), time_used (where a run's time went)."""
