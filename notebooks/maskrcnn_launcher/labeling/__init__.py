"""From a trained model back to labeling: batch predictions over an S3 prefix, planned
(batch_plan) and run (batch_jobs), their COCO files (predictions); pre-annotations for the
labeling tools (pre_annotations, from masks as polygons: polygons); which images to label next
(ranking) and their picture (contact_sheet); all of it written back beside the run (handoff)."""
