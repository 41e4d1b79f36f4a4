"""What a predictions run hands back to labeling: the labeling tools' pre-annotations, the ranking
of what to label next and its contact sheet, written beside the run's COCO files and uploaded with
them.

    finished = handoff.finish(deployment, "<transform job>", boto_session, folder)  # all of it
    # or, for a run at hand:
    files = handoff.write(run, report, read_image, folder, top=24)
    for line in handoff.next_steps(files, "s3://<bucket>/<output prefix>predictions/<name>/"):
        print(line)
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional

from maskrcnn_contract import s3_objects

from maskrcnn_launcher.labeling import (
    batch_jobs,
    batch_plan,
    contact_sheet,
    pre_annotations,
    ranking,
)
from maskrcnn_launcher.labeling.predictions import Predictions

DEFAULT_TOP = 24   # images on the contact sheet: a page of 6 x 4 thumbnails
# Where a run's files are written on this machine before they are uploaded: <root>/<name>/.
ROOT_ENV = "MASKRCNN_PREDICTIONS_DIR"
DEFAULT_ROOT = "~/SageMaker/predictions"


def default_folder(name: str) -> str:
    """<$MASKRCNN_PREDICTIONS_DIR or ~/SageMaker/predictions>/<name>: beside the notebooks."""
    return os.path.join(os.path.expanduser(os.environ.get(ROOT_ENV) or DEFAULT_ROOT), name)


@dataclasses.dataclass
class Handoff:
    paths: List[str]                          # every file written, in the order written
    pre: pre_annotations.PreAnnotations
    ranked: ranking.Ranking
    sheet: Optional[str]                      # None: no image was answered


def write(run: Predictions, report: Optional[Dict], read_image: Callable[[str], bytes],
          folder: str, top: int = DEFAULT_TOP, local_files_root: Optional[str] = None) -> Handoff:
    """The pre-annotations, the ranking (weighted by the report's per-class AP when given) and a
    contact sheet of its first `top` images (fewer when the run has fewer), written to `folder`.
    `local_files_root`: for a run over a local folder, Label Studio's local files root
    (pre_annotations.build)."""
    pre = pre_annotations.build(run, local_files_root)
    paths = pre.write(folder)
    ranked = ranking.rank(run, report)
    paths += ranking.write(ranked, folder)
    sheet = None
    if run.images:
        sheet = contact_sheet.write(ranked, run, read_image, folder, min(top, len(run.images)))
        paths.append(sheet)
    return Handoff(paths=paths, pre=pre, ranked=ranked, sheet=sheet)


def next_steps(handoff: Handoff, location: str, shown: int = 10) -> List[str]:
    """The first images to label, then each tool's import steps for the files at `location`."""
    lines = [f"Label next ({ranking.RANKING_CSV}, most uncertain first"
             + (f"; contact sheet {contact_sheet.CONTACT_SHEET}" if handoff.sheet else "") + "):"]
    lines += [f"  {row.rank:>3}. {row.file_name}  {row.score:.3f}"
              for row in handoff.ranked.rows[:shown]]
    return lines + [""] + handoff.pre.import_steps(location)


@dataclasses.dataclass
class Finished:
    run: Predictions
    handoff: Handoff
    location: str          # s3://<bucket>/<output prefix>predictions/<name>/
    uris: List[str]        # the files uploaded there
    lines: List[str]       # the summary, the first images to label, the import steps


def finish(deployment, name: str, boto_session, folder: str, top: int = DEFAULT_TOP,
           echo: Callable[[str], None] = print) -> Finished:
    """An ended transform job collected (batch_jobs.collect), its hand-off written to `folder`, all
    of it uploaded beside its answers; the CLI's `predictions` and inference.ipynb's last cells."""
    run, report = batch_jobs.collect(deployment, name, boto_session, folder, echo=echo)
    s3 = boto_session.client("s3")
    bucket, prefix = s3_objects.split_s3_uri(run.source)

    def read_image(file_name: str) -> bytes:
        return s3.get_object(Bucket=bucket, Key=prefix + file_name)["Body"].read()

    handed = write(run, report, read_image, folder, top)
    location = batch_plan.output_uri(deployment, name)
    uris = batch_jobs.upload(s3, handed.paths, location)
    lines = batch_jobs.describe_run(run) + [""] + next_steps(handed, location)
    return Finished(run, handed, location, uris, lines)
