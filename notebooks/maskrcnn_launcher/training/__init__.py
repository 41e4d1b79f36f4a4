"""A training launch: the user's choices (options), what it needs staged (inputs) or starts from
(init_from), where its run is tracked (tracking), resolved once (plan), checked as sent (validation,
session), built as the SageMaker SDK 3 ModelTrainer (jobs), sent (submit); a hyperparameter
tuning job over ranges of a launch (tuning); and the warm pools launches keep (warm_pools). Only
`jobs` and `session` import the SDK (`submit` through them)."""
