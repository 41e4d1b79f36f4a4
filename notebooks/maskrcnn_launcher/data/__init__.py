"""Data into the deployment: a labeling tool's export uploaded and the datasets staged so far
(exports), a dataset staged by the staging job (staging), copies on EFS and FSx (file_systems)."""
