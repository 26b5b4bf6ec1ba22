"""`validate` on real Kustomize output: compiled examples, and user overlays that break them."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import job_directories, job_text
from tfcompile.compiler.checking.validation import (
    DEFAULT_KUBERNETES_VERSION,
    KubernetesVersionError,
    ObjectProblem,
    Prerequisite,
    ValidationReport,
    known_versions,
    validate,
    validate_rendered,
)
from tfcompile.compiler.checking.validation.limits import STATEFUL_SET_NAME_LIMIT
from tfcompile.compiler.checking.validation.tf_config_members import Host, parse_host
from tfcompile.compiler.cli import main
from tfcompile.compiler.rendering.kustomize import RenderError, render
from tfcompile.compiler.rendering.manifests import parse_manifests

REPOSITORY = Path(__file__).resolve().parent.parent
EXAMPLES = REPOSITORY / "examples"
FIXTURE = Path(__file__).parent / "fixtures" / "validation" / "mnist"


def compile_example(example: str, output: Path) -> Path:
    """Compile examples/<example>/job.yaml with `tfcompile build` into `output`."""
    status = main(["build", str(EXAMPLES / example / "job.yaml"), "-o", str(output)])
    assert status == 0
    return output / example


@pytest.fixture
def mnist(tmp_path: Path) -> Path:
    return compile_example("mnist", tmp_path / "output")


def user_overlay(base: Path, kustomization: str) -> Path:
    """A user's kustomization that includes a compiled job as a resource and changes it."""
    user = base.parent.parent / "user"
    user.mkdir()
    (user / "kustomization.yaml").write_text(
        f"resources: [../output/{base.name}]\n" + textwrap.dedent(kustomization)
    )
    return user


def scaled_by_patch(base: Path, target: str, replicas: int) -> ValidationReport:
    """The report on `base` under a user's patch that sets the replicas of what `target`
    selects, without recompiling."""
    return validate(user_overlay(base, f"""\
        patches:
        - target: {target}
          patch: |
            - {{op: replace, path: /spec/replicas, value: {replicas}}}
        """))


def messages(report: ValidationReport) -> list[str]:
    return [str(problem) for problem in report.problems]


EXAMPLE_NAMES = sorted(path.parent.name for path in EXAMPLES.glob("*/job.yaml"))


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_compiled_examples_validate_cleanly(example: str, tmp_path: Path) -> None:
    compile_example(example, tmp_path / "output")
    jobs = job_directories(tmp_path / "output")  # the sweep's: a job per trial, its board
    assert len(jobs) == (10 if example == "sweep" else 1)
    for job in jobs:
        report = validate(job)
        assert messages(report) == []
        assert report.kubernetes_version == DEFAULT_KUBERNETES_VERSION
        assert report.objects == parse_manifests(render(job))  # Kustomize's, in its order


def test_hand_written_contract_fixture_validates_and_lists_prerequisites() -> None:
    report = validate(FIXTURE)
    assert report.ok
    assert report.prerequisites == [
        Prerequisite(
            kind="Secret",
            name="s3-credentials",
            namespace=None,
            used_by=("StatefulSet/mnist-chief", "StatefulSet/mnist-worker"),
            keys=("secret",),
        )
    ]
    assert "requires: Secret/s3-credentials (keys: secret)" in report.to_text()


def test_validation_is_deterministic(mnist: Path) -> None:
    assert validate(mnist) == validate(mnist)


def test_namespace_overlay_keeps_short_hosts_working(mnist: Path) -> None:
    report = validate(user_overlay(mnist, "namespace: ml\n"))
    assert messages(report) == []
    assert {item["metadata"]["namespace"] for item in report.objects} == {"ml"}


@pytest.mark.parametrize(
    ("setting", "pod"),
    [("namePrefix: team-", "team-mnist-worker-0"), ("nameSuffix: -v2", "mnist-worker-v2-0")],
)
def test_name_prefix_or_suffix_breaks_tf_config_hosts(mnist: Path, setting: str, pod: str) -> None:
    report = validate(user_overlay(mnist, setting + "\n"))
    owner = "StatefulSet/" + pod.removesuffix("-0")
    assert [problem.object_reference for problem in report.problems] == [owner, owner]
    first = report.problems[0].message
    assert "cluster.worker[0] lists mnist-worker-0.mnist-worker:2222" in first
    assert "no rendered StatefulSet creates a pod named mnist-worker-0" in first
    assert pod in first
    assert "set the name in job.yaml" in first


def test_replica_patch_without_recompiling_is_caught(mnist: Path) -> None:
    report = scaled_by_patch(mnist, "{kind: StatefulSet, name: mnist-worker}", 3)
    assert len(report.problems) == 1
    problem = report.problems[0]
    assert problem.object_reference == "StatefulSet/mnist-worker"
    assert "3 replicas but TF_CONFIG lists 2 worker tasks" in problem.message
    assert "replicas in job.yaml" in problem.message


def test_scaling_down_by_patch_is_one_problem(mnist: Path) -> None:
    report = scaled_by_patch(mnist, "{kind: StatefulSet, name: mnist-worker}", 1)
    assert messages(report) == [
        "StatefulSet/mnist-worker: it has 1 replicas but TF_CONFIG lists 2 worker tasks, so the "
        "cluster waits for tasks that no pod runs; change the role's replicas in job.yaml and run "
        "`tfcompile build` (a patch to replicas does not update TF_CONFIG)"
    ]


@dataclass(frozen=True)
class HostilePatch:
    """A user patch on a compiled job, and what validate must say about it."""

    name: str
    patches: str
    objects: list[str]  # the objects the problems name, in order
    says: list[tuple[str, ...]]  # for each problem, fragments its message must contain


SERVICE = "- target: {kind: Service, name: mnist-worker}\n  patch: |\n"
STATEFULSET = "- target: {kind: StatefulSet, name: mnist-worker}\n  patch: |\n"

HOSTILE_PATCHES = [
    HostilePatch(
        "Service patched to ClusterIP",
        SERVICE + "    - {op: remove, path: /spec/clusterIP}\n"
        "    - {op: add, path: /spec/type, value: ClusterIP}\n",
        ["Service/mnist-worker"], [("not headless", "keep `clusterIP: None`")],
    ),
    HostilePatch(
        "Service without publishNotReadyAddresses",
        SERVICE + "    - {op: replace, path: /spec/publishNotReadyAddresses, value: false}\n",
        ["Service/mnist-worker"], [("publishNotReadyAddresses",)],
    ),
    HostilePatch(
        "Service selector that misses the pods",
        SERVICE + "    - {op: add, path: /spec/selector/tier, value: gpu}\n",
        ["Service/mnist-worker"], [("selects tier=gpu",)],
    ),
    HostilePatch(
        "governing Service removed",
        SERVICE + "    $patch: delete\n    apiVersion: v1\n    kind: Service\n"
        "    metadata: {name: mnist-worker}\n",
        ["StatefulSet/mnist-worker"], [("no Service/mnist-worker is rendered",)],
    ),
    HostilePatch(
        "container port removed",
        STATEFULSET + "    - {op: remove, path: /spec/template/spec/containers/0/ports}\n",
        ["StatefulSet/mnist-worker", "Service/mnist-worker"],
        [("no container declares containerPort 2222",), ("no port of it reaches port 2222",)],
    ),
    HostilePatch(
        "container port renamed (the Service targets it by name)",
        STATEFULSET + "    - {op: replace, path: /spec/template/spec/containers/0/ports/0/name,"
        " value: grpc}\n",
        ["Service/mnist-worker"],
        [("no port of it reaches port 2222 of the pods of StatefulSet/mnist-worker",)],
    ),
    HostilePatch(
        "container port number changed",
        STATEFULSET + "    - {op: replace, path: /spec/template/spec/containers/0/ports/0/"
        "containerPort, value: 3333}\n",
        ["StatefulSet/mnist-worker", "Service/mnist-worker"],
        [("containerPort 2222",), ("port 2222",)],
    ),
    HostilePatch(
        "env reordered so TASK_INDEX comes after TF_CONFIG",
        STATEFULSET + "    - {op: move, from: /spec/template/spec/containers/0/env/0,"
        " path: /spec/template/spec/containers/0/env/-}\n",
        ["StatefulSet/mnist-worker"],
        [("still contains $(TASK_INDEX)", "defined in env before TF_CONFIG")],
    ),
]


@pytest.mark.parametrize("hostile", HOSTILE_PATCHES, ids=[h.name for h in HOSTILE_PATCHES])
def test_hostile_patches_are_caught_and_name_the_object(
    mnist: Path, hostile: HostilePatch
) -> None:
    report = validate(user_overlay(mnist, "patches:\n" + hostile.patches))
    assert [problem.object_reference for problem in report.problems] == hostile.objects
    for problem, fragments in zip(report.problems, hostile.says, strict=True):
        for fragment in fragments:
            assert fragment in problem.message, problem.message


def test_pods_that_disagree_on_the_cluster() -> None:
    objects_text = render(FIXTURE).replace(
        '"chief":["mnist-chief-0.mnist-chief:2222"],"worker"', '"worker"', 1
    )
    report = validate_rendered(objects_text, FIXTURE)
    references = [problem.object_reference for problem in report.problems]
    assert "StatefulSet/mnist-chief" in references
    assert any("every pod must see the same cluster" in message for message in messages(report))


def test_tf_config_too_big_for_one_environment_string() -> None:
    padding = "x" * 131072
    rendered = render(FIXTURE).replace('"environment":"cloud"', f'"padding":"{padding}"')
    report = validate_rendered(rendered, FIXTURE)
    assert {problem.object_reference for problem in report.problems} == {
        "StatefulSet/mnist-chief",
        "StatefulSet/mnist-worker",
    }
    assert all("MAX_ARG_STRLEN" in message for message in messages(report))


def test_misspelt_field_fails_the_strict_schema(mnist: Path) -> None:
    report = validate(
        user_overlay(
            mnist,
            """\
            patches:
            - target: {kind: StatefulSet, name: mnist-worker}
              patch: |
                - {op: add, path: /spec/template/spec/containers/0/imagePullPolicyy, value: Always}
                - {op: replace, path: /spec/replicas, value: "2"}
            """,
        )
    )
    assert messages(report) == [
        "StatefulSet/mnist-worker: spec.replicas: \"2\" is not of type ['integer', 'null'] "
        "(Kubernetes 1.33 schema; the API server would reject this object)",
        "StatefulSet/mnist-worker: spec.template.spec.containers[0]: fields are not allowed "
        "('imagePullPolicyy' was unexpected) (Kubernetes 1.33 schema; the API server would "
        "reject this object)",
    ]


def test_unknown_kinds_are_noted_not_failed(mnist: Path) -> None:
    user = user_overlay(mnist, "")
    (user / "kustomization.yaml").write_text("resources: [../output/mnist, widget.yaml]\n")
    (user / "widget.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: thing}\nspec: {size: 1}\n"
    )
    report = validate(user)
    assert report.ok
    assert report.notes == [
        "Widget/thing: example.com/v1 Widget is not a built-in Kubernetes 1.33 kind; "
        "its fields were not checked",
        'Pod Security "restricted" is met by the pods of StatefulSet/mnist-worker',
        "PersistentVolumeClaim/mnist-shared names no storage class: the cluster's default "
        "StorageClass provisions it (kubectl get storageclass shows which is the default), and "
        "it must make ReadWriteMany volumes",
    ]


def test_long_name_suffix_breaks_the_revision_hash_label(mnist: Path) -> None:
    suffix = "-" + "x" * (STATEFUL_SET_NAME_LIMIT - len("mnist-worker"))
    report = validate(user_overlay(mnist, f"nameSuffix: {suffix}\n"))
    name_problems = [problem for problem in report.problems if "characters" in problem.message]
    assert [problem.object_reference for problem in name_problems] == [
        f"StatefulSet/mnist-worker{suffix}"
    ]
    assert "controller-revision-hash" in name_problems[0].message


def test_object_too_big_for_client_side_apply(mnist: Path) -> None:
    user = user_overlay(
        mnist,
        f"""\
        configMapGenerator:
        - name: vocabulary
          literals: [words={"w" * 270000}]
        """,
    )
    report = validate(user)
    assert len(report.problems) == 1
    assert report.problems[0].object_reference.startswith("ConfigMap/vocabulary-")
    assert "ServerSideApply=true" in report.problems[0].message


def test_missing_key_in_a_rendered_config_map(mnist: Path) -> None:
    report = validate(
        user_overlay(
            mnist,
            """\
            configMapGenerator:
            - name: settings
              literals: [mode=fast]
            patches:
            - target: {kind: StatefulSet, name: mnist-worker}
              patch: |
                - op: add
                  path: /spec/template/spec/containers/0/env/-
                  value: {name: MODE, valueFrom: {configMapKeyRef: {name: settings, key: speed}}}
            """,
        )
    )
    assert len(report.problems) == 1
    assert report.problems[0].object_reference == "StatefulSet/mnist-worker"
    assert "key 'speed' of ConfigMap/settings-" in report.problems[0].message
    assert report.prerequisites == []


def test_single_pod_job_scaled_by_patch(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job_text("solo", roles="worker: {replicas: 1}"))
    assert main(["build", str(jobs / "job.yaml"), "-o", str(tmp_path / "output")]) == 0
    solo = tmp_path / "output" / "solo"
    assert validate(solo).ok
    report = scaled_by_patch(solo, "{kind: StatefulSet}", 3)
    assert [problem.object_reference for problem in report.problems] == ["StatefulSet/solo-worker"]
    assert "none has TF_CONFIG" in report.problems[0].message


@pytest.mark.parametrize(
    ("version", "expected"),
    [("1.28", "1.28"), ("v1.30", "1.30"), ("1.31.4", "1.31"), (known_versions()[-1],) * 2],
)
def test_known_versions_are_accepted(version: str, expected: str) -> None:
    report = validate(FIXTURE, version)
    assert report.ok
    assert report.kubernetes_version == expected


@pytest.mark.parametrize(
    ("version", "message"),
    [("1.27", "too old"), ("2.0", "unknown Kubernetes version"), ("latest", "unknown")],
)
def test_unknown_version_lists_the_known_ones(version: str, message: str) -> None:
    with pytest.raises(KubernetesVersionError) as failure:
        validate(FIXTURE, version)
    assert message in str(failure.value)
    assert DEFAULT_KUBERNETES_VERSION in str(failure.value)
    assert "1.28" in str(failure.value)


def test_strict_environment_names_before_1_32(tmp_path: Path) -> None:
    user = user_overlay_of_fixture(
        tmp_path,
        """\
        configMapGenerator:
        - name: settings
          literals: [1st=one, second=two]
        patches:
        - target: {kind: StatefulSet, name: mnist-worker}
          patch: |
            - op: add
              path: /spec/template/spec/containers/0/envFrom
              value: [{configMapRef: {name: settings}}]
        """,
    )
    assert not any("1st" in note for note in validate(user, "1.33").notes)
    old = validate(user, "1.31")
    assert old.ok
    assert any("does not get envFrom keys 1st" in note for note in old.notes)


def test_a_cluster_older_than_1_30_is_told_what_its_pods_may_do(tmp_path: Path) -> None:
    """Before Kubernetes 1.30 there is no ValidatingAdmissionPolicy to hold a job's pods to
    their own record and to scaling their job to 0: `validate` says what they may do there."""
    released = compile_example("parameter-server", tmp_path / "output")  # onSuccess: release
    idle = compile_example("mnist", tmp_path / "output")
    policy = ("Kubernetes 1.29 serves no ValidatingAdmissionPolicy of "
              "admissionregistration.k8s.io/v1 (GA in 1.30), so the launcher policy "
              "(deploy/cluster/launcher-policy.yaml) cannot be enforced there: a pod's token may "
              "write any task's record in the job's state")
    assert f"Role/parameter-server-launcher: {policy} and, since it releases itself " \
           "(onSuccess or onFailure: release), scale the job's StatefulSets to any number of " \
           "replicas" in \
           validate(released, "1.29").notes
    assert f"Role/mnist-launcher: {policy}" in validate(idle, "1.29").notes
    for version in ("1.30", DEFAULT_KUBERNETES_VERSION):
        for job in (released, idle):
            assert not any("launcher policy" in note for note in validate(job, version).notes)


def user_overlay_of_fixture(tmp_path: Path, kustomization: str) -> Path:
    output = tmp_path / "output"
    output.mkdir()
    job = output / "mnist"
    job.mkdir()
    for source in FIXTURE.iterdir():
        (job / source.name).write_text(source.read_text())
    return user_overlay(job, kustomization)


def test_render_failure_is_an_error_not_a_report(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="kustomization"):
        validate(tmp_path)


def test_problem_names_the_object() -> None:
    assert str(ObjectProblem("StatefulSet/a", "broke")) == "StatefulSet/a: broke"


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("job-worker-0.job-worker:2222", ("job-worker-0", "job-worker", None, 2222)),
        ("a-0.a.ml:1", ("a-0", "a", "ml", 1)),
        ("a-0.a.ml.svc:1", ("a-0", "a", "ml", 1)),
        ("a-0.a.ml.svc.cluster.local:1", ("a-0", "a", "ml", 1)),
        ("a-0.a.ml.pod.cluster.local:1", None),
        ("a-0:2222", None),
        ("a-0.a", None),
        ("a-0.a:0", None),
        ("a-0.a:port", None),
        ("10.0.0.1:2222", None),
    ],
)
def test_tf_config_host_forms(text: str, parts: tuple[str, str, str | None, int] | None) -> None:
    assert parse_host(text) == (None if parts is None else Host(text, *parts))


@pytest.mark.parametrize(
    ("host_suffix", "problem"),
    [
        (".ml.svc.cluster.local:2222", None),
        (".ml.svc:2222", None),
        (
            ".other.svc:2222",
            "in namespace other, but the job's pods are rendered into namespace ml",
        ),
    ],
)
def test_fully_qualified_hosts(tmp_path: Path, host_suffix: str, problem: str | None) -> None:
    user = user_overlay_of_fixture(tmp_path, "namespace: ml\n")
    rendered = render(user)
    for role in ("chief", "worker"):
        rendered = rendered.replace(f".mnist-{role}:2222", f".mnist-{role}{host_suffix}")
    report = validate_rendered(rendered, user)
    if problem is None:
        assert messages(report) == []
    else:
        assert report.problems
        assert all(problem in message for message in messages(report))


def test_objects_of_the_wrong_shape_are_schema_problems_not_crashes() -> None:
    rendered = render(FIXTURE)
    broken = rendered.replace("      containers:\n", "      containers: oops\n      ignored:\n", 1)
    report = validate_rendered(broken, FIXTURE)
    assert not report.ok
    assert all("schema" in message for message in messages(report))
    assert report.notes[-1].startswith("names, sizes, the TensorFlow topology and references")


def test_null_replicas_means_one(tmp_path: Path) -> None:
    rendered = render(FIXTURE).replace("replicas: 1\n", "replicas: null\n")
    report = validate_rendered(rendered, FIXTURE)
    assert messages(report) == []


def test_other_stateful_sets_in_the_same_kustomization_are_left_alone(mnist: Path) -> None:
    user = user_overlay(mnist, "")
    (user / "kustomization.yaml").write_text("resources: [../output/mnist, cache.yaml]\n")
    (user / "cache.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: apps/v1
            kind: StatefulSet
            metadata: {name: cache}
            spec:
              replicas: 3
              serviceName: cache
              selector: {matchLabels: {app: cache}}
              template:
                metadata: {labels: {app: cache}}
                spec:
                  containers: [{name: redis, image: redis:7}]
            """
        )
    )
    report = validate(user)
    assert messages(report) == []


OVERLAYS = REPOSITORY / "overlays"


def compile_job(tmp_path: Path, spec_lines: str, roles: str = "worker: {replicas: 2}") -> Path:
    """Compile a job `demo` with `spec_lines` (the shipped components available) into
    tmp_path/output/demo."""
    path = tmp_path / "jobs" / "job.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job_text(spec_lines=spec_lines, roles=roles))
    status = main(["build", str(path), "-o", str(tmp_path / "output"), "--overlays",
                   str(OVERLAYS)])
    assert status == 0
    return tmp_path / "output" / "demo"


PARAMETER_SERVERS = "strategy: ParameterServer\n"


def test_gpus_on_a_parameter_server_are_a_warning(tmp_path: Path) -> None:
    report = validate(compile_job(tmp_path, PARAMETER_SERVERS,
                                  "worker: {replicas: 2, gpus: 1}\nps: {replicas: 1, gpus: 2}"))
    assert report.ok
    assert report.warnings == [
        "StatefulSet/demo-ps: container tensorflow asks for 2 nvidia.com/gpu "
        "(spec.roles.ps.gpus in the job's spec): parameter servers hold and update the "
        "variables and compute nothing, so the GPU stays idle and keeps the pod waiting for a "
        "GPU node; remove gpus from roles.ps and give them to the workers (or the chief)"]


def test_gpus_on_workers_only_are_no_warning(tmp_path: Path) -> None:
    report = validate(compile_job(tmp_path, PARAMETER_SERVERS,
                                  "worker: {replicas: 2, gpus: 1}\nps: {replicas: 1}"))
    assert report.warnings == []


def shared(size: str, overlays: str = "") -> str:
    return (f"storage:\n  shared: {{mountPath: /mnt/shared, size: {size}}}\n"
            + (f"overlays: [{overlays}]\n" if overlays else ""))


def test_an_azure_nfs_share_under_its_minimum_is_a_warning(tmp_path: Path) -> None:
    """Azure Files NFS shares are premium: the CSI driver makes a smaller claim a 100 GiB
    share (billed as such), so the claim works and `validate` warns with the minimum."""
    report = validate(compile_job(tmp_path, shared("10Gi", "azure")))
    assert report.ok
    assert report.warnings == [
        "PersistentVolumeClaim/demo-shared: asks for 10Gi of StorageClass "
        "tfcompile-azurefile-nfs, an Azure Files premium share, which holds 100Gi at least: the "
        "Azure Files CSI driver makes the share 100Gi, billed as such; ask for 100Gi or more "
        "(storage.shared.size in the job's spec)"]


@pytest.mark.parametrize(("size", "overlays"), [
    ("100Gi", "azure"), ("120Gi", "azure"), ("10Gi", "azure-smb"), ("10Gi", "")])
def test_a_share_at_its_minimum_or_of_a_standard_class_is_no_warning(
    tmp_path: Path, size: str, overlays: str,
) -> None:
    report = validate(compile_job(tmp_path, shared(size, overlays)))
    assert not [warning for warning in report.warnings if "premium" in warning]


def test_a_rendered_premium_v2_class_has_its_own_minimum(tmp_path: Path) -> None:
    job = compile_job(tmp_path, shared("8Gi"))
    user = user_overlay(job, """\
        patches:
        - target: {kind: PersistentVolumeClaim}
          patch: |
            - {op: add, path: /spec/storageClassName, value: files-v2}
        """)
    kustomization = user / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace(
        "resources: [../output/demo]", "resources: [../output/demo, class.yaml]"))
    (user / "class.yaml").write_text(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: files-v2}\n"
        "provisioner: file.csi.azure.com\nparameters: {skuName: PremiumV2_LRS, protocol: nfs}\n")
    report = validate(user)
    assert [warning.split(": ")[1] for warning in report.warnings] == [
        "asks for 8Gi of StorageClass files-v2, an Azure Files premium share, which holds 32Gi "
        "at least"]
    assert ("PersistentVolumeClaim/demo-shared needs StorageClass files-v2, which the output "
            "creates") in report.notes


@pytest.mark.parametrize(("lines", "note"), [
    (shared("100Gi", "azure"), "PersistentVolumeClaim/demo-shared needs StorageClass "
     "tfcompile-azurefile-nfs, which must exist in the cluster: "
     "overlays/azure/storage-class.yaml defines it (apply it once per cluster)"),
    (shared("5Gi", "azure-smb"), "PersistentVolumeClaim/demo-shared needs StorageClass "
     "azurefile-csi, one of AKS's built-in classes (on another cluster it must be created)"),
    ("storage:\n  shared: {mountPath: /mnt/shared, size: 5Gi, storageClassName: fast-rwx}\n",
     "PersistentVolumeClaim/demo-shared needs StorageClass fast-rwx, which must exist in the "
     "cluster (kubectl get storageclass)"),
    (shared("5Gi"), "PersistentVolumeClaim/demo-shared names no storage class: the cluster's "
     "default StorageClass provisions it (kubectl get storageclass shows which is the "
     "default), and it must make ReadWriteMany volumes"),
], ids=["azure component", "azure-smb component", "named class", "default class"])
def test_validate_notes_the_storage_class_each_claim_needs(
    tmp_path: Path, lines: str, note: str,
) -> None:
    """Judged after the components, which choose the class."""
    report = validate(compile_job(tmp_path, lines))
    assert [line for line in report.notes if "StorageClass" in line] == [note]
    assert f"  note: {note}" in report.to_text()


def test_an_older_tfjob_label_in_a_rendered_selector_is_a_warning(mnist: Path) -> None:
    """A component spreads the workers by `replica-type`, which only TFJob's pods carried."""
    user = user_overlay(mnist, """\
        patches:
        - target: {kind: StatefulSet}
          patch: |
            - op: add
              path: /spec/template/spec/topologySpreadConstraints
              value:
              - maxSkew: 1
                topologyKey: kubernetes.io/hostname
                whenUnsatisfiable: ScheduleAnyway
                labelSelector: {matchLabels: {replica-type: worker}}
        """)
    report = validate(user)
    assert report.ok
    assert report.warnings == [
        "StatefulSet/mnist-worker: spec.template.spec.topologySpreadConstraints[0]."
        "labelSelector.matchLabels.replica-type: selects pods by replica-type, a label "
        "Kubeflow's training operator put on TFJob pods (a Kubernetes Job's pods carry job-name "
        "too); tfcompile's pods do not carry it, so this selects none of the job's pods: use "
        "tfcompile.dev/role (chief, worker, ps or evaluator; TFJob's master is chief)"]


def test_an_operator_label_in_a_rendered_selector_is_an_error(mnist: Path) -> None:
    user = user_overlay(mnist, """\
        patches:
        - target: {kind: StatefulSet}
          patch: |
            - op: add
              path: /spec/template/spec/affinity
              value:
                podAntiAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                  - topologyKey: kubernetes.io/hostname
                    labelSelector:
                      matchExpressions:
                      - {key: training.kubeflow.org/job-name, operator: In, values: [mnist]}
        """)
    report = validate(user)
    assert [problem.object_reference for problem in report.problems] == [
        "StatefulSet/mnist-worker"]
    assert report.problems[0].message.startswith(
        "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuring"
        "Execution[0].labelSelector.matchExpressions[0].key: selects pods by "
        "training.kubeflow.org/job-name, a label only Kubeflow's training operator puts on "
        "TFJob pods; tfcompile's pods do not carry it, so this selects none of the job's pods: "
        "use tfcompile.dev/job")


def test_the_parameter_server_role_validate_names_is_the_specs() -> None:
    from tfcompile.compiler.checking.validation.parameter_server_gpus import (
        PARAMETER_SERVER_ROLE,
    )
    from tfcompile.spec.models import RoleName

    assert RoleName.PS.value == PARAMETER_SERVER_ROLE
