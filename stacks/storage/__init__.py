"""The storage stack's components, one construct each, composed by `storage`: the data bucket with
its key (`data_bucket`), the FSx for Lustre cache of the bucket's input prefixes (dataset,
pretrained backbone; `lustre_cache`), and the EFS mirror of those prefixes with one DataSync task
each (`efs_mirror`)."""
