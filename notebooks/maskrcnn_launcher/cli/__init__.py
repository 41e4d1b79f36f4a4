"""`python -m maskrcnn_launcher`: main assembles each flow's commands (data, training, runs,
serving, labeling)."""
