"""The notebooks the notebook instance receives, with the training job's contract beside them.

The launcher in `notebooks/` imports `maskrcnn_job.hyperparameters` and `maskrcnn_job.metrics`
(pure Python) so that hyperparameter names and metric regexes exist in one place only. The asset
is bundled at synth by copying, with no Docker: `notebooks/` plus those two modules as a package.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
JOB_PACKAGE_DIR = REPO_ROOT / "training_code" / "maskrcnn_job"
CONTRACT_MODULES = ("hyperparameters.py", "metrics.py")
IGNORED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc")


@jsii.implements(ILocalBundling)
class _CopyNotebooksAndContract:
    def try_bundle(self, output_dir: str, _options) -> bool:
        shutil.copytree(NOTEBOOKS_DIR, output_dir, dirs_exist_ok=True, ignore=IGNORED)
        package = Path(output_dir) / "maskrcnn_job"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text(
            '"""The training job\'s contract (hyperparameters, metrics), copied at synth."""\n')
        for name in CONTRACT_MODULES:
            shutil.copy2(JOB_PACKAGE_DIR / name, package / name)
        return True


def notebooks_asset(scope: Construct, construct_id: str) -> s3_assets.Asset:
    return s3_assets.Asset(
        scope, construct_id,
        path=str(NOTEBOOKS_DIR),
        # Hash what is shipped, so a change to the contract modules ships too.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Never pulled: local bundling always succeeds.
            image=DockerImage.from_registry("local-bundling-only"),
            local=_CopyNotebooksAndContract(),
        ),
    )
