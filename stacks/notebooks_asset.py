"""The notebooks the notebook instance receives, with the job-launcher contract beside them.

The launcher in `notebooks/` imports `maskrcnn_contract` (hyperparameters, metrics, channel and
SSM names), the same package the training image installs. The asset is `notebooks/` plus that
package copied whole, bundled at synth by copying, with no Docker.
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
CONTRACT_PACKAGE_DIR = REPO_ROOT / "contract" / "maskrcnn_contract"
IGNORED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc")


@jsii.implements(ILocalBundling)
class _CopyNotebooksAndContract:
    def try_bundle(self, output_dir: str, _options) -> bool:
        shutil.copytree(NOTEBOOKS_DIR, output_dir, dirs_exist_ok=True, ignore=IGNORED)
        shutil.copytree(CONTRACT_PACKAGE_DIR, Path(output_dir) / CONTRACT_PACKAGE_DIR.name,
                        dirs_exist_ok=True, ignore=IGNORED)
        return True


def notebooks_asset(scope: Construct, construct_id: str) -> s3_assets.Asset:
    return s3_assets.Asset(
        scope, construct_id,
        path=str(NOTEBOOKS_DIR),
        # Hash what is shipped, so a change to the contract ships too.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Never pulled: local bundling always succeeds.
            image=DockerImage.from_registry("local-bundling-only"),
            # jsii hands try_bundle the options as one struct, not as its generated keywords.
            local=_CopyNotebooksAndContract(),  # type: ignore[arg-type]
        ),
    )
