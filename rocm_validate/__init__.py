"""rocm_validate: is this GPU node's ML stack correct, as fast as it was, and still converging?

Fourteen rooms, each importing only the layers below it (tests/test_layout.py): plugin (the
pytest entry point), errors and text (messages shortened, never mid-word) at the top; core (the
pytest machinery every suite shares), node (whole-node runs: one pinned worker per GPU), platform (facts and decisions about the machine), results
(what a run produces) and workloads (the work the suites run) below the suites; the suites'
logic in preflight, correctness, perf, convergence and collectives; fleet (a rollout's node
reports merged) and cli (the `rocm-validate` command) on top. The README's Layout table says
what each module holds.

Importing the package imports neither torch nor any GPU library; the heavy parts load
inside the fixtures and commands that need them.
"""

__version__ = "0.1.0"
