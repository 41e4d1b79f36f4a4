"""From a trained model back to labeling: batch predictions over an S3 prefix, pre-annotations for
the labeling tools, and which images to label next."""
