"""The storage stack's components, one construct each: the data bucket with its key, the FSx for
Lustre cache of the bucket, and the EFS mirror of the bucket with its DataSync task."""
