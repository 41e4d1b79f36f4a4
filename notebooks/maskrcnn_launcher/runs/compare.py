"""Training jobs side by side: their curves (each job's TensorBoard output) and their per-class AP
(each job's evaluation report), as tables and one picture.

    compared = compare.compare(deployment, ["maskrcnn-a-...", "maskrcnn-b-..."], boto_session)
    print("\\n".join(compare.curve_lines(compared) + compare.per_class_lines(compared)))
    compare.figure(compared)                    # a matplotlib Figure (panels, then the bars)
    compare.picture(compared, "compare.png")   # that figure, written to a file
    compare.show(compared)                      # in a notebook: the tables, then the picture

Each job's summaries are copied from
`<TensorBoardOutputConfig S3OutputPath><job>/tensorboard-output/` (docs/aws-rules.md TRN-2) into the
folder the launch notebooks copy a run into (runs/tensorboard_logs.py:
`<root>/<run>/<job>/tensorboard-output/`, only what is new), and read there without TensorFlow
(runs/event_files.py). A Completed job's report comes from its model.tar.gz
(runs/evaluation_report.py, kept after the first download). A running job has curves and no report
yet; a job that is another deployment's, a staging job or one that does not exist is refused
(lookup.RunRequestError) before anything is copied.
"""

import dataclasses
import hashlib
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from maskrcnn_contract import metrics as job_metrics

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import evaluation_report, event_files, lookup, tensorboard_logs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The curves compared unless others are asked for: those of them any job has.
DEFAULT_TAGS = ("train/loss", "eval/loss", "eval/segm_AP", "eval/bbox_AP",
                job_metrics.BEST_OBJECTIVE)
TENSORBOARD_OUTPUT = "tensorboard-output"  # below <S3OutputPath><job>/ (TRN-2)


@dataclasses.dataclass
class Compared:
    jobs: List[str]
    curves: Dict[str, event_files.Scalars]     # by job
    reports: Dict[str, Optional[dict]]         # by job; None: no report (yet)
    notes: List[str]                           # what is missing, and why


def _refuse(problem: str) -> lookup.RunRequestError:
    return lookup.RunRequestError(problem)


def tensorboard_location(job: dict) -> Optional[tuple]:
    """(S3 URI of the job's summaries, the local folder they are copied to), or None for a job
    sent without a TensorBoardOutputConfig."""
    config = job.get("TensorBoardOutputConfig")
    if not config:
        return None
    run_uri, name = config["S3OutputPath"].rstrip("/"), job["TrainingJobName"]
    local = tensorboard_logs.local_dir(run_uri.rsplit("/", 1)[-1]) / name / TENSORBOARD_OUTPUT
    return f"{run_uri}/{name}/{TENSORBOARD_OUTPUT}/", local


def check_job_names(job_names: Sequence[str]) -> List[str]:
    """Refuses fewer than two jobs, or one named twice."""
    names = list(job_names)
    if len(names) < 2 or len(set(names)) != len(names):
        raise _refuse(f"compare takes two or more different training jobs, got "
                      f"{', '.join(names) or 'none'}")
    return names


def compare(deployment: Deployment, job_names: Sequence[str], boto_session) -> Compared:
    """The curves and reports of two or more of this deployment's training jobs."""
    names = check_job_names(job_names)
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    jobs = {}
    for name in names:  # every job checked before anything is copied
        job = lookup.describe_job(sagemaker, deployment, name, _refuse)
        if lookup.is_staging_job(deployment, name, job):
            raise _refuse(f"training job {name!r} is a dataset staging job: it trains no model")
        jobs[name] = job
    reports: Dict[str, Optional[Dict]]
    curves, reports, notes = {}, {}, []
    for name, job in jobs.items():
        location = tensorboard_location(job)
        if location is None:
            notes.append(f"{name}: sent without TensorBoardOutputConfig: no curves")
            curves[name] = event_files.read([])
        else:
            uri, local = location
            tensorboard_logs.copy_new(s3, uri, local)
            curves[name] = event_files.read([local] if local.is_dir() else [])
            if not curves[name].files:
                notes.append(f"{name}: no TensorBoard summaries under {uri} yet")
            notes += [f"{name}: {path}: its last record is not uploaded whole yet"
                      for path in curves[name].truncated]
        reports[name] = None
        if job["TrainingJobStatus"] != "Completed":
            notes.append(f"{name}: {job['TrainingJobStatus']}: no evaluation report until it "
                         "completes")
            continue
        try:
            reports[name] = evaluation_report.cached(deployment, name, boto_session).report
        except lookup.RunRequestError as error:
            notes.append(f"{name}: {error}")
    return Compared(names, curves, reports, notes)


def tags_of(compared: Compared, tags: Optional[Sequence[str]] = None) -> List[str]:
    """`tags` as asked (refused if no job has one of them), else DEFAULT_TAGS that some job has."""
    present = {tag for scalars in compared.curves.values() for tag in scalars.curves}
    if tags:
        missing = [t for t in tags if t not in present]
        if missing:
            raise _refuse(f"no job compared has the curve(s) {', '.join(missing)}; they have: "
                          f"{', '.join(sorted(present)) or 'none'}")
        return list(tags)
    return [t for t in DEFAULT_TAGS if t in present]


def _labels(compared: Compared) -> Dict[str, str]:
    return {name: f"J{i + 1}" for i, name in enumerate(compared.jobs)}


def legend_lines(compared: Compared) -> List[str]:
    return [f"{label} = {name}" for name, label in _labels(compared).items()]


def curve_lines(compared: Compared, tags: Optional[Sequence[str]] = None) -> List[str]:
    """Per curve and job: its points, the steps they span, the first, last, lowest and highest
    value."""
    labels = _labels(compared)
    out = [f"{'curve':<22}  job  points  steps        first     last      lowest    highest"]
    for tag in tags_of(compared, tags):
        for name in compared.jobs:
            points = compared.curves[name].curves.get(tag, [])
            if not points:
                out.append(f"{tag:<22}  {labels[name]:<3}  {0:>6}  -")
                continue
            values = [p.value for p in points]
            steps = f"{points[0].step}-{points[-1].step}"
            out.append(f"{tag:<22}  {labels[name]:<3}  {len(points):>6}  {steps:<11}  "
                       f"{values[0]:<8.4g}  {values[-1]:<8.4g}  {min(values):<8.4g}  "
                       f"{max(values):<8.4g}".rstrip())
    return out


def per_class(compared: Compared, task: str = "segm") -> Dict[str, Dict[str, Optional[float]]]:
    """{class: {job: AP}} of the jobs' reports (None: no report, or COCO's undefined), the
    classes in the order they first appear; 'all classes' is each report's summary AP."""
    table: Dict[str, Dict[str, Optional[float]]] = {}
    for name in compared.jobs:
        result = (compared.reports[name] or {}).get("tasks", {}).get(task)
        for row in (result or {}).get("per_class", []):
            table.setdefault(row["name"], {})[name] = row.get("AP")
    summary = {name: ((compared.reports[name] or {}).get("tasks", {}).get(task) or {})
               .get("summary", {}).get("AP") for name in compared.jobs}
    table = {cls: {name: aps.get(name) for name in compared.jobs} for cls, aps in table.items()}
    table["all classes"] = summary
    return table


def per_class_lines(compared: Compared, task: str = "segm") -> List[str]:
    """The per-class AP, one column per job (`-`: no report, the class absent from the job's
    dataset, or undefined)."""
    labels, table = _labels(compared), per_class(compared, task)
    width = max(len(c) for c in table)
    kind = "mask" if task == "segm" else "box"
    out = [f"{kind + ' AP':<{width}}  " + "  ".join(f"{labels[n]:>6}" for n in compared.jobs)]
    for cls, aps in table.items():
        out.append(f"{cls:<{width}}  " + "  ".join(
            f"{'-' if aps[n] is None else format(aps[n], '.3f'):>6}" for n in compared.jobs))
    return out


def default_picture_path(compared: Compared) -> str:
    digest = hashlib.sha1("\n".join(compared.jobs).encode()).hexdigest()[:12]
    return os.path.join(evaluation_report.default_root(), "comparisons", f"compare-{digest}.png")


def figure(compared: Compared, tags: Optional[Sequence[str]] = None,
           task: str = "segm") -> "Figure":
    """The picture as a matplotlib Figure: a panel per curve of tags_of(compared, tags), titled
    with its tag (a line per job that has it, labelled with the job), then the per-class AP of
    `task` (per_class: a bar per job and class, None drawn as 0, the classes as tick labels). A
    Figure of its own, not pyplot's: nothing to close, shown nowhere unless saved."""
    from matplotlib.figure import Figure

    chosen, table = tags_of(compared, tags), per_class(compared, task)
    classes = [c for c in table if c != "all classes"]
    columns = 2
    rows = -(-len(chosen) // columns) + 1
    drawn = Figure(figsize=(max(12.0, 0.3 * len(classes) * len(compared.jobs)), 3.6 * rows),
                   constrained_layout=True)
    grid = drawn.add_gridspec(rows, columns)
    labels = _labels(compared)
    for i, tag in enumerate(chosen):
        axes = drawn.add_subplot(grid[i // columns, i % columns])
        for name in compared.jobs:
            points = compared.curves[name].curves.get(tag, [])
            if points:
                axes.plot([p.step for p in points], [p.value for p in points],
                          marker="o" if len(points) < 30 else None, markersize=3,
                          label=f"{labels[name]} {name}")
        axes.set_title(tag)
        axes.set_xlabel("step")
        axes.legend(fontsize="small")
    bars = drawn.add_subplot(grid[rows - 1, :])
    width = 0.8 / len(compared.jobs)
    for j, name in enumerate(compared.jobs):
        overall = table["all classes"][name]
        bars.bar([k + j * width for k in range(len(classes))],
                 [table[c][name] or 0.0 for c in classes], width,
                 label=f"{labels[name]} {name} (all classes "
                       f"{'-' if overall is None else format(overall, '.3f')})")
    bars.set_xticks([k + 0.4 - width / 2 for k in range(len(classes))], classes,
                    rotation=90 if len(classes) > 12 else 0)
    bars.set_ylabel(f"{'mask' if task == 'segm' else 'box'} AP per class")
    bars.legend(fontsize="small")
    return drawn


def picture(compared: Compared, path: Optional[str] = None,
            tags: Optional[Sequence[str]] = None, task: str = "segm") -> str:
    """figure() written as one PNG. Returns its path (default: default_picture_path)."""
    path = path or default_picture_path(compared)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure(compared, tags, task).savefig(path, dpi=100)
    return path


def show(compared: Compared, path: Optional[str] = None,
         tags: Optional[Sequence[str]] = None) -> str:
    """In a notebook: the legend, the tables and the notes printed, then the picture shown."""
    from IPython.display import Image, display

    print("\n".join(legend_lines(compared) + curve_lines(compared, tags)
                    + per_class_lines(compared) + compared.notes))
    written = picture(compared, path, tags)
    print(f"picture: {written}")
    display(Image(filename=written))
    return written
