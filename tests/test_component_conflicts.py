"""Components that fight: `validate` reports what a component removed or changed of what the job
or an earlier component set (a toleration, an env var, a node selector key, the namespace, ...),
naming the component and who set it; a component's `restartPolicy` other than `Always` and a
replaced `tensorflow` command or args are errors. All rendered with the real kustomize."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import OVERLAYS, Result, job_text
from tfcompile.compiler.checking.validation.component_conflicts import component_problems
from tfcompile.compiler.checking.validation.component_steps import (
    COMPILED_OUTPUT,
    ComponentSteps,
    component_steps,
    kustomization_with_components,
    renders_with_its_steps,
    steps_and_final,
)
from tfcompile.compiler.checking.validation.validator import validate
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests

OWN_TOLERATION = """\
podTemplate:
  spec:
    tolerations: [{key: dedicated, operator: Exists}]
"""


def job(overlays: str, extra: str = OWN_TOLERATION, metadata: str = "") -> str:
    """The job `fight`: two GPU workers under `overlays`, with `extra` spec lines."""
    return job_text("fight", metadata_lines=metadata,
                    spec_lines=f'env: {{EPOCHS: "3"}}\noverlays: [{overlays}]\n' + extra,
                    roles="worker: {replicas: 2, gpus: 1}")


def component(*patches: str, namespace: str | None = None) -> str:
    """A Component whose patches (each a patch text) apply to every StatefulSet."""
    text = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
    if namespace is not None:
        text += f"namespace: {namespace}\n"
    if patches:
        text += "patches:\n"
    for patch in patches:
        text += "- target: {kind: StatefulSet}\n  patch: |-\n" + textwrap.indent(
            textwrap.dedent(patch), "    ")
    return text


def pod_spec_patch(lines: str) -> str:
    """A strategic-merge patch of a StatefulSet's pod spec."""
    return ("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: any}\nspec:\n"
            "  template:\n    spec:\n" + textwrap.indent(textwrap.dedent(lines), "      "))


SPOT = component(pod_spec_patch("tolerations:\n- {key: spot, operator: Exists}\n"))

ENVIRONMENT = component("""\
    - op: replace
      path: /spec/template/spec/containers/0/env
      value: [{name: ONLY, value: "1"}]
    """)


def repository(tmp_path: Path, job_yaml: str, components: dict[str, str]) -> Path:
    overlay_directory = tmp_path / "overlays"
    for name in ("gpu", "azure"):
        shutil.copytree(OVERLAYS / name, overlay_directory / name)
    for name, text in components.items():
        (overlay_directory / name).mkdir(parents=True)
        (overlay_directory / name / "kustomization.yaml").write_text(text)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job_yaml)
    return jobs


def build(tmp_path: Path, run_cli: Callable[..., Result], job_yaml: str,
          components: dict[str, str]) -> Path:
    jobs = repository(tmp_path, job_yaml, components)
    output = tmp_path / "output"
    built = run_cli("build", str(jobs), "-o", str(output), "--overlays",
                    str(tmp_path / "overlays"))
    assert built.status == 0, built.stderr
    return output / "fight"


def build_and_validate(tmp_path: Path, run_cli: Callable[..., Result], overlays: str,
                       components: dict[str, str], extra: str = OWN_TOLERATION,
                       metadata: str = "") -> Result:
    return run_cli("validate", str(build(tmp_path, run_cli, job(overlays, extra, metadata),
                                         components)))


def errors(result: Result) -> list[str]:
    return [line.strip().removeprefix("error: ") for line in result.stdout.splitlines()
            if line.strip().startswith("error:")]


LIST_ADVICE = ("a strategic-merge patch replaces lists such as tolerations, and a JSON patch "
               "that replaces a list drops its entries; append instead (JSON patch `op: add` "
               "with a path ending in `/-`) or merge by name")


def test_a_component_replacing_tolerations_blames_each_entry_on_its_source(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    result = build_and_validate(tmp_path, run_cli, "gpu, spot", {"spot": SPOT})
    assert result.status == 1
    assert sorted(errors(result)) == [
        "StatefulSet/fight-worker: component ../../overlays/spot dropped the toleration key "
        f"dedicated, operator Exists that the compiled output had: {LIST_ADVICE}",
        "StatefulSet/fight-worker: component ../../overlays/spot dropped the toleration key "
        "nvidia.com/gpu, operator Exists, effect NoSchedule that component ../../overlays/gpu "
        f"added: {LIST_ADVICE}",
        "StatefulSet/fight-worker: component ../../overlays/spot dropped the toleration key "
        "sku, value gpu, operator Equal, effect NoSchedule that component ../../overlays/gpu "
        f"added: {LIST_ADVICE}",
    ]


def test_a_component_replacing_what_only_an_earlier_component_added_is_found(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """Nothing of the compiled output is lost: the job has no toleration of its own."""
    result = build_and_validate(tmp_path, run_cli, "gpu, spot", {"spot": SPOT}, extra="")
    assert result.status == 1
    assert sorted(errors(result)) == [
        "StatefulSet/fight-worker: component ../../overlays/spot dropped the toleration key "
        "nvidia.com/gpu, operator Exists, effect NoSchedule that component ../../overlays/gpu "
        f"added: {LIST_ADVICE}",
        "StatefulSet/fight-worker: component ../../overlays/spot dropped the toleration key "
        "sku, value gpu, operator Equal, effect NoSchedule that component ../../overlays/gpu "
        f"added: {LIST_ADVICE}",
    ]


def test_a_component_replacing_env_is_named_without_values(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    result = build_and_validate(tmp_path, run_cli, "environment", {"environment": ENVIRONMENT})
    assert result.status == 1
    assert ("component ../../overlays/environment dropped the env var TF_CONFIG of container "
            "tensorflow that the compiled output had") in result.stdout
    assert ("dropped the env var EPOCHS of container tensorflow that the compiled output had"
            in result.stdout)
    assert '"3"' not in result.stdout


def test_a_component_replacing_node_affinity_terms_is_named(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """Node selector terms are a list a strategic merge replaces whole."""
    own_affinity = """\
        podTemplate:
          spec:
            affinity:
              nodeAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  nodeSelectorTerms:
                  - matchExpressions: [{key: pool, operator: In, values: [training]}]
        """
    zone = component(pod_spec_patch("""\
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: zone, operator: In, values: [a]}]
        """))
    result = build_and_validate(tmp_path, run_cli, "zone", {"zone": zone},
                                extra=textwrap.dedent(own_affinity))
    assert result.status == 1
    assert errors(result) == [
        "StatefulSet/fight-worker: component ../../overlays/zone dropped the required node "
        'affinity term {"matchExpressions": [{"key": "pool", "operator": "In", "values": '
        f'["training"]}}]}} that the compiled output had: {LIST_ADVICE}',
    ]


def test_a_component_changing_a_variable_of_the_job_is_named_without_values(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    epochs = component(pod_spec_patch("""\
        containers:
        - name: tensorflow
          env: [{name: EPOCHS, value: "99071"}]
        """))
    result = build_and_validate(tmp_path, run_cli, "epochs", {"epochs": epochs})
    assert result.status == 1
    assert errors(result) == [
        "StatefulSet/fight-worker: component ../../overlays/epochs changed the env var EPOCHS "
        "of container tensorflow, which the compiled output set: only the last value is kept; "
        "make them agree, or leave the setting to one of them",
    ]
    # Neither value is shown (a value distinct enough not to be in a temporary path).
    assert "99071" not in result.stdout and '"3"' not in result.stdout


def test_two_components_setting_one_node_selector_key_are_named(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """One component selects the GPU pool by `agentpool: gpu`; a later one says `cpu`."""
    gpu_pool = component(pod_spec_patch("nodeSelector: {agentpool: gpu}\n"))
    cpu_pool = component(pod_spec_patch("nodeSelector: {agentpool: cpu}\n"))
    result = build_and_validate(tmp_path, run_cli, "gpu, gpu-pool, cpu-pool",
                                {"gpu-pool": gpu_pool, "cpu-pool": cpu_pool})
    assert result.status == 1
    assert errors(result) == [
        "StatefulSet/fight-worker: component ../../overlays/cpu-pool changed the node selector "
        'agentpool from "gpu", which component ../../overlays/gpu-pool set, to "cpu": only the '
        "last value is kept; make them agree, or leave the setting to one of them",
    ]


def test_components_agreeing_on_a_node_selector_pass(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    gpu_pool = component(pod_spec_patch("nodeSelector: {agentpool: gpu}\n"))
    same = component(pod_spec_patch("nodeSelector: {agentpool: gpu, pool: training}\n"))
    result = build_and_validate(tmp_path, run_cli, "gpu, gpu-pool, same",
                                {"gpu-pool": gpu_pool, "same": same})
    assert result.status == 0, result.stdout


NAMESPACE_ADVICE = ("only the last value is kept; make them agree, or leave the setting to one "
                    "of them (a job's objects must share one namespace: its pods find each "
                    "other, their Services and their ConfigMaps there)")


def test_two_components_setting_the_namespace_are_named_once(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    result = build_and_validate(
        tmp_path, run_cli, "team-a, team-b",
        {"team-a": component(namespace="team-a"), "team-b": component(namespace="team-b")})
    assert result.status == 1
    assert errors(result) == [
        "ServiceAccount/fight-launcher and 7 other objects: component ../../overlays/team-b "
        'moved them to namespace "team-b" from namespace "team-a", which component '
        f"../../overlays/team-a set: {NAMESPACE_ADVICE}",
    ]


def test_a_component_moving_some_objects_out_of_the_namespace_is_named(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """The job says `namespace: ml`; one component moves everything to `team-a`, and a later
    one moves the StatefulSets alone to `team-b`, away from their Services."""
    move_statefulsets = component("""\
        - op: replace
          path: /metadata/namespace
          value: team-b
        """)
    result = build_and_validate(
        tmp_path, run_cli, "team-a, statefulsets",
        {"team-a": component(namespace="team-a"), "statefulsets": move_statefulsets},
        metadata="namespace: ml")
    assert result.status == 1
    found = [line for line in errors(result) if "component" in line]
    assert len(found) == 2, found
    assert found[0].endswith(
        'and 7 other objects: component ../../overlays/team-a moved them to namespace "team-a" '
        f'from namespace "ml", which the compiled output set: {NAMESPACE_ADVICE}')
    assert found[1] == (
        "StatefulSet/fight-worker: component ../../overlays/statefulsets moved it to namespace "
        '"team-b" from namespace "team-a", which component ../../overlays/team-a set: '
        f"{NAMESPACE_ADVICE}")
    # What that breaks is found as well: the pods' governing Service is in another namespace.
    assert any(line.startswith("StatefulSet/fight-worker: spec.serviceName is fight-worker but "
                               "no Service/fight-worker is rendered") for line in errors(result))


def test_a_component_setting_restart_policy_is_an_error(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    on_failure = component(pod_spec_patch("restartPolicy: OnFailure\n"))
    result = build_and_validate(tmp_path, run_cli, "gpu, on-failure", {"on-failure": on_failure})
    assert result.status == 1
    assert errors(result) == [
        "StatefulSet/fight-worker: component ../../overlays/on-failure sets restartPolicy "
        "OnFailure: a StatefulSet's pods must restart Always (the API server refuses anything "
        "else); tfcompile's launcher already stops a task that succeeded or gave up "
        "(onSuccess, failurePolicy), so leave restartPolicy out",
    ]


def test_a_component_replacing_the_tensorflow_command_is_an_error(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    direct = component(pod_spec_patch("""\
        containers:
        - name: tensorflow
          command: [python, /app/train.py]
          args: [--epochs, "1"]
        """))
    result = build_and_validate(tmp_path, run_cli, "direct", {"direct": direct})
    assert result.status == 1
    assert errors(result) == [
        "StatefulSet/fight-worker: component ../../overlays/direct replaces the command of "
        "container tensorflow: without the launcher (python "
        "/opt/tfcompile/launcher/tfcompile-launcher.pyz --role=worker --) no success or failure "
        "is recorded, "
        "and failurePolicy, deadline, onSuccess and the revision gate do not apply; set the "
        "training command with `command` and `args` in job.yaml",
        "StatefulSet/fight-worker: component ../../overlays/direct replaces the args of "
        "container tensorflow, the training command tfcompile's launcher runs: set it with "
        "`command` and `args` in job.yaml (or a role's), where the revision and the review "
        "see it",
    ]


def test_the_shipped_components_only_add(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    result = build_and_validate(tmp_path, run_cli, "gpu, azure", {})
    assert result.status == 0, result.stdout
    assert errors(result) == []
    assert "no problems" in result.stdout.splitlines()[0]
    assert "note: what each component changes" not in result.stdout


def test_a_users_overlay_naming_a_component_is_checked_too(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    build(tmp_path, run_cli, job("gpu"), {"spot": SPOT})
    overlay = tmp_path / "production"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../output/fight]\ncomponents: [../overlays/spot]\n")
    result = run_cli("validate", str(overlay))
    assert result.status == 1
    assert ("component ../overlays/spot dropped the toleration key nvidia.com/gpu, operator "
            "Exists, effect NoSchedule that the resources of kustomization.yaml (before any "
            "component) had") in result.stdout


def test_kustomizes_own_annotations_are_no_change(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """With `buildMetadata`, kustomize records each object's origin and transformers, which
    differ from one step to the next: that is no component's doing."""
    build(tmp_path, run_cli, job("gpu"), {})
    overlay = tmp_path / "production"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../output/fight]\ncomponents: [../overlays/azure]\n"
        "buildMetadata: [originAnnotations, transformerAnnotations]\n")
    result = run_cli("validate", str(overlay))
    assert result.status == 0, result.stdout
    assert "alpha.config.kubernetes.io/transformations" in render(overlay)


def test_restart_policy_and_deadline_are_checked_without_components(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """A user's overlay patches the job itself: no component to name, still an error."""
    build(tmp_path, run_cli, job("gpu"), {})
    overlay = tmp_path / "production"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../output/fight]\npatches:\n- target: {kind: StatefulSet}\n  patch: |-\n"
        + textwrap.indent(pod_spec_patch("restartPolicy: Never\nactiveDeadlineSeconds: 60\n"),
                          "    "))
    result = run_cli("validate", str(overlay))
    assert result.status == 1
    assert errors(result) == [
        "StatefulSet/fight-worker: restartPolicy Never: a StatefulSet's pods must restart "
        "Always (the API server refuses anything else); tfcompile's launcher already stops a "
        "task that succeeded or gave up (onSuccess, failurePolicy), so leave restartPolicy out",
        "StatefulSet/fight-worker: activeDeadlineSeconds: a StatefulSet's pods cannot have one "
        "(the API server refuses it); use `deadline` in job.yaml",
    ]


def test_a_kustomization_that_needs_its_components_is_noted_not_checked(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    """The overlay's own patch needs the ConfigMap its component adds: without the component
    it cannot be rendered, so what each component changes cannot be told; a note says so."""
    build(tmp_path, run_cli, job("gpu"), {})
    extra = tmp_path / "overlays" / "extra"
    extra.mkdir()
    (extra / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
        "configMapGenerator:\n- {name: extra, literals: [a=1], options: "
        "{disableNameSuffixHash: true}}\n")
    overlay = tmp_path / "production"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../output/fight]\ncomponents: [../overlays/extra]\npatches:\n"
        "- patch: |-\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: extra}\n"
        "    data: {b: '2'}\n")
    result = run_cli("validate", str(overlay))
    assert result.status == 0, result.stdout
    assert "note: what each component changes was not checked: rendering before each " \
        "component failed: " in result.stdout
    assert "tfcompile-components-" not in result.stdout


def test_the_renderings_made_in_one_run_equal_those_made_one_by_one(
    tmp_path: Path, kustomize_runs: Path,
) -> None:
    """Generated names with hashes, a name prefix, a namespace, a component adding objects and
    one patching them: taking the markers off gives, object for object, what kustomize renders
    for each prefix of the components alone; and one kustomize run gave them all."""
    directory, components, kustomization = layered_kustomization(tmp_path, namespace=False)
    found = kustomization_with_components(directory)
    assert found is not None
    steps = component_steps(directory, found)
    assert len(kustomize_runs.read_text().splitlines()) == 1
    assert steps.components == tuple(components)
    assert list(steps.before) == renderings_one_by_one(
        tmp_path, directory, components, kustomization)


def test_the_directorys_own_rendering_made_with_the_steps_equals_kustomizes_alone(
    tmp_path: Path, kustomize_runs: Path,
) -> None:
    """`validate` takes the job's own rendering from the run that renders the steps: object
    for object and in order, it is what kustomize renders for the directory alone."""
    directory, _, _ = layered_kustomization(tmp_path, namespace=False)
    found = kustomization_with_components(directory)
    assert found is not None
    together = steps_and_final(directory, found)
    assert together is not None
    assert len(kustomize_runs.read_text().splitlines()) == 1
    steps, final = together
    assert steps == component_steps(directory, found)
    alone = parse_manifests(render(directory))
    assert final == alone
    assert [item["kind"] for item in final] == ["ServiceAccount", "ConfigMap", "ConfigMap",
                                                 "StatefulSet"]


@pytest.mark.parametrize("field", ["sortOptions: {order: fifo}",
                                   "buildMetadata: [originAnnotations]"])
def test_what_only_the_top_kustomization_decides_is_rendered_alone(
    tmp_path: Path, kustomize_runs: Path, field: str,
) -> None:
    """Under a wrapper, Kustomize would ignore the job's own order or build metadata: such a
    kustomization is not rendered with its steps, and `validate` reports on the objects in
    the order and with the annotations kustomize gives the directory alone."""
    directory, _, _ = layered_kustomization(tmp_path, namespace=False)
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + field + "\n")
    report = validate(directory)
    assert report.objects == parse_manifests(render(directory))
    found = kustomization_with_components(directory)
    assert found is not None and not renders_with_its_steps(found)
    if field.startswith("sortOptions"):
        assert report.objects[0]["kind"] == "StatefulSet"  # as listed
    else:
        assert "config.kubernetes.io/origin" in report.objects[0]["metadata"]["annotations"]


def test_kinds_kustomize_does_not_prefix_are_rendered_one_by_one(
    tmp_path: Path, kustomize_runs: Path,
) -> None:
    """A Namespace object keeps its name under a `namePrefix`, so the renderings before each
    component cannot be made in one run (the same object twice): they are made one by one."""
    directory, components, kustomization = layered_kustomization(tmp_path, namespace=True)
    found = kustomization_with_components(directory)
    assert found is not None
    steps = component_steps(directory, found)
    assert len(kustomize_runs.read_text().splitlines()) == 1 + len(components)
    assert list(steps.before) == renderings_one_by_one(
        tmp_path, directory, components, kustomization)


def test_validate_renders_a_job_with_a_namespace_object_alone_and_its_steps_one_by_one(
    tmp_path: Path, kustomize_runs: Path,
) -> None:
    """The run that would render the job with its steps fails to tell them apart: the job is
    rendered alone, and the steps one by one, without trying them together again."""
    directory, components, _ = layered_kustomization(tmp_path, namespace=True)
    report = validate(directory)
    assert len(kustomize_runs.read_text().splitlines()) == 2 + len(components)
    assert report.objects == parse_manifests(render(directory))
    assert not [note for note in report.notes if "was not checked" in note]


def layered_kustomization(tmp_path: Path, *, namespace: bool) -> tuple[Path, list[str], str]:
    """A kustomization of a StatefulSet (and, with `namespace`, a Namespace object) under three
    components; its directory, its components and its text without them."""
    overlays = tmp_path / "overlays"
    for name, text in {
        "first": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                 "namespace: first\nconfigMapGenerator:\n- {name: settings, literals: [a=1]}\n"
                 "resources: [service-account.yaml]\n",
        "second": component(pod_spec_patch("serviceAccountName: trainer\nvolumes:\n"
                                           "- {name: settings, configMap: {name: settings}}\n")),
        "third": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                 "configMapGenerator:\n- {name: settings, behavior: merge, literals: [b=2]}\n",
    }.items():
        (overlays / name).mkdir(parents=True)
        (overlays / name / "kustomization.yaml").write_text(text)
    (overlays / "first" / "service-account.yaml").write_text(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: trainer}\n")
    directory = tmp_path / "job"
    directory.mkdir()
    (directory / "statefulset.yaml").write_text(textwrap.dedent("""\
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: worker}
        spec:
          serviceName: worker
          selector: {matchLabels: {app: worker}}
          template:
            metadata: {labels: {app: worker}}
            spec:
              containers: [{name: tensorflow, image: tensorflow/tensorflow:2.16.1,
                            envFrom: [{configMapRef: {name: settings}}]}]
        """))
    resources = ["statefulset.yaml"]
    if namespace:
        (directory / "namespace.yaml").write_text(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: first}\n")
        resources.append("namespace.yaml")
    components = ["../overlays/first", "../overlays/second", "../overlays/third"]
    kustomization = (f"namePrefix: team-\nresources: [{', '.join(resources)}]\n"
                     "configMapGenerator:\n- {name: base, literals: [c=3]}\n")
    (directory / "kustomization.yaml").write_text(
        kustomization + f"components: [{', '.join(components)}]\n")
    return directory, components, kustomization


def renderings_one_by_one(tmp_path: Path, directory: Path, components: list[str],
                          kustomization: str) -> list[list[dict[str, object]]]:
    """What kustomize renders for `directory` with each prefix of its components but the
    whole list."""
    renderings = []
    for count in range(len(components)):
        alone = tmp_path / f"alone-{count}"
        shutil.copytree(directory, alone)
        (alone / "kustomization.yaml").write_text(
            kustomization + (f"components: [{', '.join(components[:count])}]\n"
                             if count else ""))
        renderings.append(parse_manifests(render(alone)))
    return renderings


def test_a_job_with_components_costs_one_kustomize_run(
    tmp_path: Path, run_cli: Callable[..., Result], kustomize_runs: Path,
) -> None:
    """However many components: one run for the job and the renderings before each but the
    first; the job without components, and so the rendering before the first component, is
    read without Kustomize (tests/test_plain_kustomization.py)."""
    plain = ("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
             "labels: [{pairs: {pool: training}}]\n")
    jobs = {"none": "", "one": "plain", "three": "gpu, azure, plain"}
    for name, overlays in jobs.items():
        workspace = tmp_path / name
        workspace.mkdir()
        directory = build(workspace, run_cli, job(overlays) if overlays else job_text("fight"),
                          {"plain": plain})
        kustomize_runs.write_text("")
        result = run_cli("validate", str(directory))
        assert result.status == 0, result.stdout
        runs = len(kustomize_runs.read_text().splitlines())
        assert runs == {"none": 0, "one": 1, "three": 1}[name], (name, runs)


def test_names_and_values_from_components_reach_no_terminal_raw() -> None:
    """A component's path and the values it sets are the user's text: control characters in
    them are printed escaped."""

    def statefulset(node_selector: dict[str, str], policy: str) -> dict[str, object]:
        return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "worker"},
                "spec": {"template": {"spec": {"nodeSelector": node_selector,
                                               "restartPolicy": policy}}}}

    steps = ComponentSteps(("../\x1b]0;owned\x07",),
                           ([statefulset({"pool": "a"}, "Always")],), COMPILED_OUTPUT)
    found, replaced = component_problems(
        steps, [statefulset({"pool": "b\x1b[2J"}, "Never\x1b[2J")])
    text = "\n".join(str(problem) for problem in found)
    assert len(found) == 2 and len(replaced) == 1
    assert "\x1b" not in text and "\x07" not in text
    assert '"../\\u001b]0;owned\\u0007"' in text and '"b\\u001b[2J"' in text


def _worker(tolerations: list[str], pool: str | None = None) -> dict[str, object]:
    """A role's StatefulSet tolerating each key of `tolerations`, selecting `pool` if given."""
    spec: dict[str, object] = {"tolerations": [{"key": key, "operator": "Exists"}
                                               for key in tolerations]}
    if pool is not None:
        spec["nodeSelector"] = {"pool": pool}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "fight-worker"},
            "spec": {"template": {"spec": spec}}}


def test_what_a_later_component_restores_is_no_conflict_and_what_stays_lost_is() -> None:
    """In process, without kustomize: `spot` replaces the tolerations, `gpu-again` puts the
    GPU's back. The GPU toleration is in the final rendering: no problem names it. The job's own
    `dedicated` stays lost: it is reported, blamed on `spot`, set by the compiled output."""
    steps = ComponentSteps(
        ("spot", "gpu-again"),
        ([_worker(["dedicated", "gpu"])], [_worker(["spot"])]), COMPILED_OUTPUT)
    found, _ = component_problems(steps, [_worker(["spot", "gpu"])])
    assert [str(problem) for problem in found] == [
        "StatefulSet/fight-worker: component spot dropped the toleration key dedicated, "
        f"operator Exists that the compiled output had: {LIST_ADVICE}"]


def test_a_change_is_blamed_on_the_component_that_set_the_value_it_undid() -> None:
    """`gpu-pool` sets the pool the job did not set; `cpu-pool` changes it: the value undone is
    `gpu-pool`'s, not the compiled output's."""
    steps = ComponentSteps(
        ("gpu-pool", "cpu-pool"), ([_worker([])], [_worker([], pool="gpu")]), COMPILED_OUTPUT)
    found, _ = component_problems(steps, [_worker([], pool="cpu")])
    assert [str(problem) for problem in found] == [
        'StatefulSet/fight-worker: component cpu-pool changed the node selector pool from "gpu", '
        'which component gpu-pool set, to "cpu": only the last value is kept; make them agree, '
        "or leave the setting to one of them"]
