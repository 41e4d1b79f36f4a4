"""The training loop (`trainer`), the Model Garden experiment it trains (`experiment`), its
step arithmetic (`schedule`), COCO evaluation (`evaluation`), the best evaluation so far and
early stopping (`best`), a fine-tuning run's start from an earlier checkpoint
(`init_from_checkpoint`), experiment tracking with MLflow on the chief (`tracking`), and the
stall watchdog that fails a run which stops making progress (`watchdog`, pure Python) with the
peers it asks which process stopped (`peers`)."""
