"""The training loop (`trainer`), the Model Garden experiment it trains (`experiment`), its
step arithmetic (`schedule`), and COCO evaluation (`evaluation`)."""
