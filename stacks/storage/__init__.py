"""The storage stack's components, one construct each: the data bucket with its key, the FSx for
Lustre cache of the bucket's input prefixes (dataset, pretrained backbone), and the EFS mirror of
those prefixes with one DataSync task each."""
