"""IAM evaluation of the tests' AWS calls: every call the launcher, the notebooks, the CLI, the
deploy module and the staging job make in their tests is evaluated against the synthesized
template's policies of the role that makes it (docs/testing.md, "IAM evaluation")."""
