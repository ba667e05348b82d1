"""What a run produces, torch-free: metrics (a measurement and its verdict), report (the
metrics table, the JSON report and its schemas, device summaries), jsonfile (schema-checked,
atomically written JSON)."""
