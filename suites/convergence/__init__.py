"""Convergence: MLPerf RCP checks and the built-in mini-BERT benchmark."""
