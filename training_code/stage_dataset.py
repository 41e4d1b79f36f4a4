"""SageMaker entry point of the staging job (`SAGEMAKER_PROGRAM=stage_dataset.py`).

The toolkit runs programs from /opt/ml/code, where only the top-level files are; the work is in
maskrcnn_job/staging/stage_dataset.py (COCO 2017 from its archives, any other dataset from a
labeling tool's export). On failure the cause goes to <OPT_ML_ROOT or /opt/ml>/output/failure
and the exit code is non-zero, as in train.py: a failed staging job never looks successful.
"""

import os
import sys
import traceback

from maskrcnn_job import sagemaker_env
from maskrcnn_job.staging import stage_dataset


def main() -> None:
    try:
        stage_dataset.main()
    except Exception as error:  # noqa: BLE001  (any cause must reach the failure file)
        traceback.print_exc()
        failure_file = os.path.join(os.environ.get("OPT_ML_ROOT", "/opt/ml"), "output", "failure")
        sagemaker_env.write_failure(failure_file,
                                    f"staging failed: {type(error).__name__}: {error}")
        sys.exit(1)


if __name__ == "__main__":
    main()
