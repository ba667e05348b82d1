"""Perf: throughput against stored per-device baselines."""
