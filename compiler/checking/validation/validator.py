"""`validate`: render a compiled job with Kustomize and check what a cluster would receive.

The compiler checks the spec; this checks the rendered result, because overlays and user
kustomizations (a `namePrefix`, a replica patch, a Service patch) change objects after
compilation, and Argo CD or Flux apply exactly what Kustomize renders.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    normalize_version,
    schema_directory,
)
from tfcompile.compiler.rendering.kustomize import RemoteResourceError, render
from tfcompile.compiler.rendering.manifests import KubernetesObject, parse_manifests
from tfcompile.compiler.rendering.plain_kustomization import render_plain
from tfcompile.compiler.rendering.remote_resources import remote_entries
from tfcompile.compiler.rendering.stateful_set_pods import pods_of

from .component_conflicts import component_problems
from .component_reach import kinds_each_changes, steps_from_final
from .component_steps import (
    ComponentSteps,
    ComponentStepsError,
    Kustomization,
    base_name,
    component_steps,
    kustomization_with_components,
    renders_with_its_steps,
    steps_and_final,
)
from .exposure import exposure_problems
from .images import image_warnings
from .launcher_rights import launcher_rights_notes
from .limits import name_problems, size_problems
from .parameter_server_gpus import parameter_server_gpu_warnings
from .pod_security import pod_security_notes
from .prerequisites import prerequisites_of
from .report import ObjectProblem, Prerequisite, ValidationReport
from .schemas import schema_problems
from .storage_classes import azure_share_size_warnings, storage_class_notes
from .storage_protocols import smb_checkpoint_warnings
from .tfjob_selectors import tfjob_selector_findings
from .topology import topology_problems
from .workload_rules import workload_problems

# Kubelets from 1.32 on take every envFrom key (RelaxedEnvironmentVariableValidation); older
# ones skip keys that are not C-like names.
_RELAXED_ENVIRONMENT_NAMES_FROM = (1, 32)


def validate(
    directory: Path,
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    secrets: Mapping[tuple[str, str], str] | None = None,
    *,
    allow_remote: bool = False,
) -> ValidationReport:
    """Render `directory` with Kustomize and check the result for `kubernetes_version`.

    Raises `KubernetesVersionError` for a version without installed schemas (before rendering),
    `RenderError` when Kustomize fails or (unless `allow_remote`) a kustomization names a
    remote resource, `ManifestError` when its output is not Kubernetes objects; all three carry
    a message for the user. Problems in the rendered objects are returned in the report, never
    raised.

    When the kustomization names components, each component's changes are checked against
    the renderings before it: told from the directory's own rendering when no two components
    can meet (`component_reach`), else made in the same Kustomize run as the directory's own
    (`component_steps.steps_and_final`). Remote entries are refused before it starts. When they
    cannot be made in one run (the kustomization sets what Kustomize reads only where a run
    starts, the run failed, or a remote entry is allowed), the renderings before each component
    are made in a thread of their own while the directory itself renders (two Kustomize
    processes at once); with a remote entry, they wait for the directory's own to succeed
    (Kustomize fetches nothing more for a job it cannot render).
    """
    version = normalize_version(kubernetes_version)
    schema_directory(version)
    kustomization = kustomization_with_components(directory)
    if kustomization is None:
        plain = render_plain(directory)
        if plain is not None:
            return validate_objects(plain, directory, version, secrets)
        return validate_rendered(render(directory, allow_remote=allow_remote), directory,
                                 version, secrets)
    remote = remote_entries(directory)
    if remote and not allow_remote:
        raise RemoteResourceError(remote)
    if not remote:
        told = _with_steps_told(directory, kustomization, version, secrets)
        if told is not None:
            return told
    tried = not remote and renders_with_its_steps(kustomization)
    together = steps_and_final(directory, kustomization) if tried else None
    if together is not None:
        steps_made, objects = together
        return _with_component_problems(validate_objects(objects, directory, version, secrets),
                                        steps_made)
    with ThreadPoolExecutor(max_workers=1) as pool:

        def steps_before() -> Future[ComponentSteps]:
            # A run of the steps with the directory failed: one without it would as well, or
            # the directory's own rendering fails and the job with it.
            return pool.submit(component_steps, directory, kustomization, allow_remote=True,
                               one_by_one=tried)

        steps = None if remote else steps_before()
        # Remote entries are checked above (and allowed, when there are any).
        report = validate_rendered(render(directory, allow_remote=True), directory, version,
                                   secrets)
        try:
            made = (steps or steps_before()).result()
        except ComponentStepsError as failure:
            report.notes.append(
                "what each component changes was not checked: rendering before each "
                f"component failed: {failure}")
            return report
    return _with_component_problems(report, made)


def _with_steps_told(directory: Path, kustomization: Kustomization, version: str,
                     secrets: Mapping[tuple[str, str], str] | None) -> ValidationReport | None:
    """The report of a job whose components cannot meet (`component_reach`): the renderings
    before each component are told from its own, the one Kustomize run; None for other jobs."""
    kinds = kinds_each_changes(directory, kustomization.components)
    if kinds is None:
        return None
    before_first = render_plain(directory, before_components=True)
    if before_first is None:
        return None
    # The caller found no remote entry: the check is not made twice.
    objects = parse_manifests(render(directory, allow_remote=True), source=str(directory))
    steps = ComponentSteps(kustomization.components,
                           tuple(steps_from_final(before_first, objects, kinds)),
                           base_name(kustomization))
    return _with_component_problems(validate_objects(objects, directory, version, secrets),
                                    steps)


def _with_component_problems(report: ValidationReport, steps: ComponentSteps
                             ) -> ValidationReport:
    """`report` with what each component removed or changed (`component_conflicts`), in place
    of the problems those findings explain."""
    found, replaced = component_problems(steps, report.objects)
    report.problems[:] = [problem for problem in report.problems if problem not in replaced]
    report.problems.extend(found)
    return report


def validate_rendered(
    rendered: str,
    directory: Path,
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    secrets: Mapping[tuple[str, str], str] | None = None,
) -> ValidationReport:
    """Check already rendered manifests (`directory` only names them in messages)."""
    objects = parse_manifests(rendered, source=str(directory))
    return validate_objects(objects, directory, kubernetes_version, secrets)


def validate_objects(
    objects: list[KubernetesObject],
    directory: Path,
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    secrets: Mapping[tuple[str, str], str] | None = None,
) -> ValidationReport:
    """Check rendered objects (`directory` only names them in messages)."""
    version = normalize_version(kubernetes_version)
    problems, notes = schema_problems(objects, version)
    try:
        found, found_notes, prerequisites, image_findings = _cluster_checks(objects, version,
                                                                            secrets)
        selector_problems, selector_warnings = tfjob_selector_findings(objects)
        found.extend(selector_problems)
        warnings = [*smb_checkpoint_warnings(objects), *azure_share_size_warnings(objects),
                    *parameter_server_gpu_warnings(objects), *selector_warnings,
                    *image_findings]
        found_notes.extend(storage_class_notes(objects))
    except (AttributeError, KeyError, TypeError, ValueError):
        if not problems:
            raise
        # Objects of the wrong shape are already reported above; the API server would refuse
        # them, so there is no pod to reason about until they are fixed.
        found, found_notes, prerequisites, warnings = [], [], [], []
        notes.append(
            "names, sizes, the TensorFlow topology and references were not checked: fix the "
            "schema errors first"
        )
    problems.extend(found)
    notes.extend(found_notes)
    return ValidationReport(
        directory=directory,
        kubernetes_version=version,
        objects=objects,
        problems=problems,
        prerequisites=prerequisites,
        notes=list(dict.fromkeys(notes)),
        warnings=warnings,
    )


def _cluster_checks(
    objects: list[KubernetesObject],
    version: str,
    secrets: Mapping[tuple[str, str], str] | None,
) -> tuple[list[ObjectProblem], list[str], list[Prerequisite], list[str]]:
    """Names, sizes, topology and references: the checks that read objects as a cluster would;
    and the warnings about the images the pods run."""
    major, minor = (int(part) for part in version.split("."))
    pods = pods_of(
        objects,
        secrets=secrets,
        strict_environment_names=(major, minor) < _RELAXED_ENVIRONMENT_NAMES_FROM,
    )
    problems = [*name_problems(objects, pods), *size_problems(objects),
                *exposure_problems(objects), *workload_problems(objects)]
    found, notes = topology_problems(objects, pods)
    notes.extend(pod_security_notes(objects))
    notes.extend(launcher_rights_notes(objects, version))
    problems.extend(found)
    prerequisites, reference_problems = prerequisites_of(objects)
    problems.extend(reference_problems)
    for pod in pods:
        for container in [*pod.init_containers, *pod.containers]:
            if container.skipped_environment_names:
                notes.append(
                    f"{pod.owner_kind}/{pod.owner_name}: container {container.name} of pod "
                    f"{pod.name} does not get envFrom keys "
                    f"{', '.join(container.skipped_environment_names)}: Kubernetes {version} "
                    "skips keys that are not valid environment variable names"
                )
    return problems, notes, prerequisites, image_warnings(objects, pods)
