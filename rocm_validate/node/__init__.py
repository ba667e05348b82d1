"""Whole-node runs (`--rocm-device=all` or a list such as `0,3,5`), torch-free at import.

plan (resolves the run plan once per process: discovery, selection, pinning, lanes, budget),
workers (the pytest and pytest-xdist wiring: one worker pinned to each selected GPU), facts (a
node run's pinning and worker specs; its plan handed to each worker), pinning (which
visibility variable pins a process), work and sharing (per-GPU, shared and node-wide work; what
each worker of a node run keeps), scheduling (the pytest-xdist scheduler of a node run), budget
(every level's budget: on one device, and per node size from the node-time model).
"""
