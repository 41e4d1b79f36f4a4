"""A labeling tool's export uploaded below the imports prefix, and the datasets staged so far
(each with its classes and images) beside the exports not staged yet."""

import os
from typing import Callable, List

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.training import inputs
from maskrcnn_launcher.training.options import LaunchRequestError


def upload_import(s3_client, deployment: Deployment, dataset: str, directory: str,
                  echo: Callable[[str], None] = print) -> int:
    """Uploads a labeling tool's export (a directory, or a .zip file) below the dataset's import
    prefix, where the staging job converts it from. Returns the number of files."""
    prefix = deployment.import_key_prefix(dataset)
    if os.path.isfile(directory):
        files = [(directory, os.path.basename(directory))]
    elif os.path.isdir(directory):
        files = sorted((os.path.join(root, name),
                        os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/"))
                       for root, _, names in os.walk(directory) for name in names)
    else:
        raise LaunchRequestError(f"export {directory!r} is neither a directory nor a file")
    if not files:
        raise LaunchRequestError(f"export {directory!r} holds no file")
    for path, relative in files:
        s3_client.upload_file(path, deployment.data_bucket, prefix + relative)
    echo(f"uploaded {len(files)} file(s) to {deployment.import_s3_uri(dataset)}")
    return len(files)


def datasets(s3_client, deployment: Deployment) -> List[dict]:
    """The datasets below the datasets prefix and the exports below the imports prefix: name,
    whether it is staged, its classes (from dataset_info.json) and whether an export waits."""
    def folders(prefix: str) -> List[str]:
        names = []
        for page in s3_client.get_paginator("list_objects_v2").paginate(
                Bucket=deployment.data_bucket, Prefix=prefix, Delimiter="/"):
            names += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])]
        return names

    staged = folders(deployment.datasets_prefix)
    uploaded = set(folders(deployment.imports_prefix))
    found = []
    for name in sorted(set(staged) | uploaded):
        entry = {"dataset": name, "staged": False, "export_uploaded": name in uploaded}
        if name in staged and inputs.dataset_staged(s3_client, deployment, name):
            info = inputs.dataset_info(s3_client, deployment, name)
            entry.update(staged=True, classes=[c.get("name") for c in info.get("categories", [])],
                         images={split: value.get("num_images")
                                 for split, value in info.get("splits", {}).items()})
        found.append(entry)
    return found
