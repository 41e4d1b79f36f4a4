"""What `cdk destroy` keeps, as the docs list it, is what the synthesized templates retain
(DeletionPolicy Retain): docs/operations.md's table and README.md's Delete step for the deployment
stack, operations.md's pipeline paragraph for the pipeline's own stack."""

import re

from tests.paths import REPO

# A retained resource, by type and logical id, as the docs name it; a resource the docs do not
# name fails below, with what to add.
NAMES = [("AWS::S3::Bucket", "AccessLogs", "access-log bucket"),
         ("AWS::S3::Bucket", "Artifacts", "artifact bucket"),
         ("AWS::S3::Bucket", "DataBucket", "data bucket"),
         ("AWS::KMS::Key", "", "KMS key"),
         ("AWS::EFS::FileSystem", "", "EFS file system"),
         ("AWS::Logs::LogGroup", "FlowLogs", "flow-log group"),
         ("AWS::SageMaker::ModelPackageGroup", "", "model package group")]


def _kept(template: dict) -> list:
    """The docs' name of each retained resource of the template, one per resource."""
    kept = []
    for logical_id, resource in template["Resources"].items():
        if resource.get("DeletionPolicy") == "Retain":
            name = next((name for kind, part, name in NAMES
                         if resource["Type"] == kind and part in logical_id), None)
            assert name, (f"{logical_id} ({resource['Type']}) is retained: name it in "
                          "docs/operations.md, \"What `cdk destroy` keeps, and why\", and here")
            kept.append(name)
    return kept


def _says_exactly(text: str, kept: list) -> list:
    """What the text gets wrong of the kept list: a kept resource it does not name, a name of
    NAMES it names that is not kept, a plural for what is kept once."""
    text = " ".join(text.split())
    problems = [f"does not name the {name}" for name in set(kept) if name not in text]
    problems += [f"names the {name}, which is not kept" for _, _, name in NAMES
                 if name not in kept and re.search(rf"\b{name}", text)]
    problems += [f"says {name}s: one is kept" for name in set(kept)
                 if kept.count(name) == 1 and f"{name}s" in text]
    return problems


def _operations_section(heading: str) -> str:
    text = (REPO / "docs" / "operations.md").read_text()
    start = text.index(f"## {heading}\n")
    return text[start:text.index("\n## ", start + 1)]


def test_the_docs_list_what_the_deployment_stack_retains(default_app):
    kept = _kept(default_app.deployment)
    table = _operations_section("What `cdk destroy` keeps, and why")
    kept_column = "\n".join(line.split("|")[1] for line in table.splitlines()
                            if line.startswith("| ") and not line.startswith("| kept |"))
    assert _says_exactly(kept_column, kept) == [], kept_column
    readme = (REPO / "README.md").read_text()
    delete_step = readme[readme.index("8. **Delete**"):]
    delete_step = delete_step[:delete_step.index("docs/operations.md")]
    assert _says_exactly(delete_step, kept) == [], delete_step


def test_the_docs_list_what_the_pipeline_stack_retains(pipeline_app):
    kept = _kept(pipeline_app.templates[f"{pipeline_app.deployment_name}-pipeline"])
    section = _operations_section("What `cdk destroy` keeps, and why")
    paragraph = section[section.index("With the pipeline"):]
    paragraph = paragraph[:paragraph.index("; the deployment stack")]
    assert _says_exactly(paragraph, kept) == [], paragraph
