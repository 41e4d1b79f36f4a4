"""This deployment's training jobs as runs: looked up by name (lookup), followed while they run
(follow), their curves (tensorboard_logs, read by event_files) and evaluation reports
(evaluation_report); side by side as a table (table) or curves and per-class AP (compare); a
tuning job's candidates (tuning_jobs); versions of the model registry (registry)."""
