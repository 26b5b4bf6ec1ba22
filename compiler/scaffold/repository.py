"""`tfcompile init`: a GitOps repository a new user can push and sync in minutes.

It writes an example job, copies the Kustomize Components shipped with the package into
`overlays/` (so they are versioned in the user's repository and can be edited for their cluster),
CI for GitHub Actions and GitLab CI (installing the tfcompile that ran `init`: `installation`
finds it), a pre-commit configuration, an Argo CD ApplicationSet (with a health check for
training jobs), a Flux Kustomization and the admission policy that holds every job's pods to
their own records and to scaling their job to zero (`builders/launcher_policy.py`), then
compiles the example, so that the CI check passes from the first commit. Nothing is written
through a symbolic link, and nothing at all when one is in the way (`writing`).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from tfcompile.compiler.kubernetes_versions import DEFAULT_KUBERNETES_VERSION, kubeconform_version
from tfcompile.compiler.objects.builders.launcher_policy import launcher_policy_objects
from tfcompile.compiler.objects.names import LAUNCHER_POLICY_FILE
from tfcompile.compiler.output.tree_readme import README_FILE
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec.schema import schema_text

from .writing import WriteRefused, refusals, write

FILES = {
    "jobs/example/job.yaml": "job.yaml.template",
    "jobs/example/train.py": "train.py",
    "ci/check.sh": "check.sh",
    ".github/workflows/tfcompile.yaml": "github-workflow.yaml",
    ".gitlab-ci.yml": "gitlab-ci.yaml",
    ".pre-commit-config.yaml": "pre-commit-config.yaml",
    "deploy/argocd/applicationset.yaml": "applicationset.yaml",
    "deploy/flux/training-jobs.yaml": "flux.yaml",
}
"""Path in the new repository -> template file in files/ beside this module."""

EXECUTABLE = {"ci/check.sh"}

OUTPUT_DIRECTORY = "output"
EXAMPLE_OUTPUT = "output/example"
"""Where `init`'s build writes the example job (`metadata.name: example` in job.yaml.template)."""

HEALTH_CHECK = "health.lua"
HEALTH_KEY = "resource.customizations.health.ConfigMap"
"""argocd-cm's key for a health check of the core group's kind ConfigMap."""


class ScaffoldError(Exception):
    """`init` would overwrite files or write through a symbolic link; nothing was written. One
    reason per path (or per list of files that exist)."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))


def _overlay_files(root: Traversable) -> dict[str, str]:
    """`overlays/<component>/<file>` for each Kustomize Component shipped with the package."""
    files: dict[str, str] = {}
    for component in sorted(root.iterdir(), key=lambda item: item.name):
        if not component.is_dir() or component.name.startswith(("_", ".")):
            continue
        for entry in sorted(component.iterdir(), key=lambda item: item.name):
            if entry.is_file() and entry.name.endswith((".yaml", ".yml")):
                files[f"overlays/{component.name}/{entry.name}"] = entry.read_text(
                    encoding="utf-8")
    return files


def argo_cd_health_patch(lua: str) -> str:
    """A patch for Argo CD's argocd-cm carrying the health check (Argo CD keeps them there)."""
    body = "".join(f"    {line}\n" if line else "\n" for line in lua.splitlines())
    return (
        "# The health of tfcompile jobs in Argo CD (Progressing while training, Healthy when\n"
        "# succeeded, Degraded when a task failed for good); the check is health.lua beside\n"
        "# this file. Merge into argocd-cm once:\n"
        "#   kubectl -n argocd patch configmap argocd-cm --patch-file "
        "deploy/argocd/argocd-cm-health.yaml\n"
        f"data:\n  {HEALTH_KEY}: |\n{body}"
    )


POLICY_HEADER = (
    "The API server's rule for the pods of every tfcompile job (Kubernetes 1.30 or later): a",
    "pod may scale its own job's StatefulSets to 0 and to nothing else, and write only its own",
    "task's record in its job's state ConfigMap; its Role cannot say that much (RBAC grants",
    "verbs on objects, not values). Apply it once per cluster, as someone who may create",
    "admission policies:",
    f"  kubectl apply --server-side -f {LAUNCHER_POLICY_FILE}",
)


def launcher_policy_text() -> str:
    """The policies and their bindings, as one file of YAML documents."""
    documents = launcher_policy_objects()
    return dump(documents[0], POLICY_HEADER) + "".join(
        "---\n" + dump(document) for document in documents[1:])


def scaffold(tfcompile_requirement: str) -> dict[str, str]:
    """The files of a new repository, by relative path, whose CI installs tfcompile with
    `pip install "<tfcompile_requirement>"`."""
    templates = resources.files("tfcompile.compiler.scaffold").joinpath("files")
    values = {
        "TFCOMPILE_REQUIREMENT": tfcompile_requirement,
        "KUBERNETES_VERSION_DEFAULT": kubeconform_version(DEFAULT_KUBERNETES_VERSION),
    }
    files: dict[str, str] = {}
    for target, source in FILES.items():
        text = templates.joinpath(source).read_text(encoding="utf-8")
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        files[target] = text
    health = templates.joinpath(HEALTH_CHECK).read_text(encoding="utf-8")
    files["deploy/argocd/health.lua"] = health
    files["deploy/argocd/argocd-cm-health.yaml"] = argo_cd_health_patch(health)
    files[LAUNCHER_POLICY_FILE] = launcher_policy_text()
    files.update(_overlay_files(resources.files("tfcompile.overlays")))
    files["jobs/trainingjob.schema.json"] = schema_text()
    return dict(sorted(files.items()))


def write_scaffold(directory: Path, tfcompile_requirement: str) -> list[str]:
    """Write the scaffold into `directory`; refuses (writing nothing) if any file exists, or if
    a symbolic link is at a path init or its build writes, or on the way to one."""
    files = scaffold(tfcompile_requirement)
    built = f"{OUTPUT_DIRECTORY}/{README_FILE}"  # the build writes the tree's README too
    reasons = refusals(directory, [*files, built], folders=[OUTPUT_DIRECTORY, EXAMPLE_OUTPUT],
                       written_folders=[EXAMPLE_OUTPUT])
    if reasons:
        raise ScaffoldError(reasons)
    try:
        write(directory, files, EXECUTABLE)
    except WriteRefused as error:
        raise ScaffoldError(error.reasons) from None
    return list(files)
