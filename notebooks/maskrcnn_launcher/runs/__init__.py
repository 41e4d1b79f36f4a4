"""This deployment's training jobs as runs: looked up by name (lookup), followed while they run
(follow), their curves (tensorboard_logs) and evaluation reports (evaluation_report)."""
