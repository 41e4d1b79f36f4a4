"""The training loop (`trainer`), the Model Garden experiment it trains (`experiment`), its
step arithmetic (`schedule`), COCO evaluation (`evaluation`), and the stall watchdog that fails
a run which stops making progress (`watchdog`, pure Python)."""
