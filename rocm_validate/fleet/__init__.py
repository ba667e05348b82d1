"""The fleet: every node's report merged into one answer for a rollout.

`reports` reads the per-node JSON reports (`--rocm-report`) into compact summaries, one at a time
(a thousand nodes fit in memory); `judge` merges them: one verdict per check across the nodes
(failing on most nodes: the image regressed; on a few: those nodes), each node's metrics against
the median of the nodes on its stack with the noise band of the peer comparison inside a node,
and the decision per node (drain, rerun, pass); `output` writes the fleet report as JSON,
markdown, JUnit (one test case per node) and a drain list. `rocm-validate fleet` is the command.
Torch-free.
"""
