"""`podTemplate`: Kubernetes' pod template vocabulary at job and role level, merged into what
tfcompile generates without losing anything, checked strictly, and secure by default."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.conftest import OVERLAYS, Result, job_text
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.spec.loading import load_jobs
from tfcompile.spec.problems import SpecError
from tfcompile.spec.schema import schema_text


def job(extra: str = "", worker: str = "") -> str:
    """The demo job with `extra` lines in its spec and `worker` lines under its worker role."""
    return job_text(spec_lines='env: {EPOCHS: "3"}\n' + textwrap.dedent(extra),
                    roles="chief: {replicas: 1}\nworker:\n  replicas: 2\n  gpus: 1\n"
                    + textwrap.indent(textwrap.dedent(worker), "  "))


JOB_TEMPLATE = """\
podTemplate:
  metadata:
    labels: {team: vision}
    annotations: {example.com/owner: ml}
  spec:
    serviceAccountName: trainer
    priorityClassName: training
    nodeSelector: {pool: training}
    tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
    imagePullSecrets: [{name: registry}]
    containers:
    - name: tensorflow
      env:
      - {name: EPOCHS, value: "5"}
      - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
"""

WORKER_TEMPLATE = """\
podTemplate:
  metadata:
    labels: {accelerator: a100}
  spec:
    nodeSelector: {gpu: a100}
    tolerations: [{key: spot, operator: Exists}]
    imagePullSecrets: [{name: mirror}]
    initContainers:
    - {name: fetch, image: busybox:1.36, command: [sh, -c, "cp -r /src /data"]}
    containers:
    - name: tensorflow
      volumeMounts: [{name: dataset, mountPath: /data, readOnly: true}]
      resources: {limits: {memory: 32Gi}}
    - name: exporter
      image: prom/node-exporter:v1.8.0
      ports: [{name: metrics, containerPort: 9100}]
    volumes:
    - {name: dataset, persistentVolumeClaim: {claimName: imagenet, readOnly: true}}
"""


def compile_job(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    (loaded,) = load_jobs(path)
    return build_objects(loaded, shipped_launcher())


def template_of(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for item in objects:
        if item["kind"] == "StatefulSet" and item["metadata"]["name"] == name:
            template: dict[str, Any] = item["spec"]["template"]
            return template
    raise AssertionError(f"no StatefulSet {name}")


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(item for item in objects
                if item["kind"] == kind and item["metadata"]["name"] == name)


def by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in entries}


@pytest.fixture
def objects(tmp_path: Path) -> list[dict[str, Any]]:
    return compile_job(tmp_path, job(JOB_TEMPLATE, WORKER_TEMPLATE))


def test_the_role_template_goes_on_top_of_the_job_template(
    objects: list[dict[str, Any]],
) -> None:
    worker = template_of(objects, "demo-worker")
    spec = worker["spec"]
    assert worker["metadata"]["labels"]["team"] == "vision"
    assert worker["metadata"]["labels"]["accelerator"] == "a100"
    assert worker["metadata"]["labels"]["tfcompile.dev/role"] == "worker"
    assert worker["metadata"]["annotations"]["example.com/owner"] == "ml"
    assert "tfcompile.dev/revision" in worker["metadata"]["annotations"]
    assert spec["nodeSelector"] == {"pool": "training", "gpu": "a100"}
    assert spec["serviceAccountName"] == "trainer"
    assert spec["priorityClassName"] == "training"
    # Lists Kubernetes would replace are appended: the job's and the role's both stay.
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists"}]
    assert spec["imagePullSecrets"] == [{"name": "registry"}, {"name": "mirror"}]
    chief = template_of(objects, "demo-chief")
    assert chief["metadata"]["labels"].get("accelerator") is None
    assert chief["spec"]["tolerations"] == spec["tolerations"][:1]


def test_containers_merge_by_name_and_sidecars_follow(objects: list[dict[str, Any]]) -> None:
    spec = template_of(objects, "demo-worker")["spec"]
    assert [c["name"] for c in spec["containers"]] == ["tensorflow", "exporter"]
    assert [c["name"] for c in spec["initContainers"]] == ["fetch"]
    tensorflow = spec["containers"][0]
    assert tensorflow["image"] == "tensorflow/tensorflow:2.16.1"
    assert tensorflow["args"] == ["python", "/app/train.py"]
    environment = by_name(tensorflow["env"])
    assert environment["EPOCHS"] == {"name": "EPOCHS", "value": "5"}  # by name: replaced
    assert environment["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert "TF_CONFIG" in environment
    assert [v["name"] for v in tensorflow["env"]].count("EPOCHS") == 1
    mounts = {m["mountPath"]: m for m in tensorflow["volumeMounts"]}
    assert mounts["/data"] == {"name": "dataset", "mountPath": "/data", "readOnly": True}
    assert "/opt/tfcompile/state" in mounts
    # The GPU limit tfcompile set and the memory limit the role added are both there.
    assert tensorflow["resources"]["limits"] == {"nvidia.com/gpu": 1, "memory": "32Gi"}
    volumes = by_name(spec["volumes"])
    assert volumes["dataset"]["persistentVolumeClaim"] == {"claimName": "imagenet",
                                                           "readOnly": True}
    assert "tfcompile-state" in volumes


def test_an_env_var_or_volume_of_a_role_replaces_the_jobs_entry_of_that_name(
    tmp_path: Path,
) -> None:
    objects = compile_job(tmp_path, job("""\
        podTemplate:
          spec:
            containers:
            - name: tensorflow
              volumeMounts: [{name: data, mountPath: /data}]
            volumes: [{name: data, emptyDir: {}}]
        """, """\
        podTemplate:
          spec:
            containers:
            - name: tensorflow
              env: [{name: EPOCHS, valueFrom: {configMapKeyRef: {name: settings, key: epochs}}}]
            volumes: [{name: data, persistentVolumeClaim: {claimName: dataset}}]
        """))
    spec = template_of(objects, "demo-worker")["spec"]
    assert by_name(spec["volumes"])["data"] == {"name": "data",
                                                "persistentVolumeClaim": {"claimName": "dataset"}}
    assert by_name(spec["containers"][0]["env"])["EPOCHS"] == {
        "name": "EPOCHS", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "epochs"}}}
    chief = template_of(objects, "demo-chief")["spec"]
    assert by_name(chief["volumes"])["data"] == {"name": "data", "emptyDir": {}}
    assert by_name(chief["containers"][0]["env"])["EPOCHS"] == {"name": "EPOCHS", "value": "3"}


def test_every_container_is_restricted_by_default(objects: list[dict[str, Any]]) -> None:
    spec = template_of(objects, "demo-worker")["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
        "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}, container["name"]


def test_the_only_token_is_the_launchers_unless_the_job_names_an_account(
    tmp_path: Path, objects: list[dict[str, Any]],
) -> None:
    # The job names `trainer`: its pods run as that account, which the launcher's Role binds.
    named = template_of(objects, "demo-worker")["spec"]
    assert named["serviceAccountName"] == "trainer"
    assert "automountServiceAccountToken" not in named
    binding = find(objects, "RoleBinding", "demo-launcher")
    assert [subject["name"] for subject in binding["subjects"]] == ["demo-launcher", "trainer"]
    plain = compile_job(tmp_path, job())
    spec = template_of(plain, "demo-worker")["spec"]
    assert (spec["serviceAccountName"], spec["automountServiceAccountToken"]) == (
        "demo-launcher", True)
    assert [subject["name"] for subject in find(plain, "RoleBinding", "demo-launcher")
            ["subjects"]] == ["demo-launcher"]
    refused = compile_job(tmp_path, job(
        "podTemplate: {spec: {automountServiceAccountToken: false}}\n"))
    assert template_of(refused, "demo-worker")["spec"]["automountServiceAccountToken"] is False


def test_a_job_that_must_run_as_root_says_so(tmp_path: Path) -> None:
    root = compile_job(tmp_path, job("""\
        podTemplate:
          spec:
            securityContext: {runAsUser: 0, runAsNonRoot: false}
            containers:
            - name: tensorflow
              securityContext: {capabilities: {add: [SYS_PTRACE]}}
        """))
    spec = template_of(root, "demo-worker")["spec"]
    assert spec["securityContext"]["runAsUser"] == 0
    assert spec["securityContext"]["runAsNonRoot"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]}}


def test_a_writable_home_and_tmp(objects: list[dict[str, Any]]) -> None:
    tensorflow = template_of(objects, "demo-worker")["spec"]["containers"][0]
    assert by_name(tensorflow["env"])["HOME"]["value"] == "/opt/tfcompile/home"
    mounts = {m["mountPath"]: m["name"] for m in tensorflow["volumeMounts"]}
    assert mounts["/tmp"] == "tfcompile-tmp"
    assert mounts["/opt/tfcompile/home"] == "tfcompile-home"


MISTAKES = job_text(spec_lines="""\
    podTemplate:
      spec:
        restartPolicy: Never
        hostname: trainer
        tolerations: [{key: a, effct: NoSchedule}]
        containers:
        - name: tensorflow
          image: other:1
          env: [{name: TF_CONFIG, value: "{}"}]
    """, roles="""\
    worker:
      replicas: 2
      podTemplate:
        metadata: {name: x, labels: {tfcompile.dev/role: ps}}
        spec:
          activeDeadlineSeconds: 60
          containers:
          - name: tensorflow
            args: [--flag]
            resources: {limits: {nvidia.com/gpu: 1}}
          volumes: [{name: tfcompile-state, emptyDir: {}}]
    """)


def _line_column(text: str, fragment: str) -> str:
    offset = text.index(fragment)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{column}"


def test_pod_template_mistakes_are_reported_at_their_place(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    path = write_job(MISTAKES)
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert not (tmp_path / "out").exists()
    lines = result.stderr.splitlines()

    def reported(fragment: str, field: str, says: str) -> None:
        where = f":{_line_column(MISTAKES, fragment)}: {field}: "
        assert any(where in line and says in line for line in lines), (where, says, lines)

    reported("effct", "spec.podTemplate.spec.tolerations[0].effct",
             "unknown field (Kubernetes 1.33 schema); allowed here: effect, key")
    # The schema error stops the owned-field checks of that fragment; the role's still run.
    reported("name: x", "spec.roles.worker.podTemplate.metadata.name",
             "names the pods after the job")
    reported("tfcompile.dev/role: ps", "spec.roles.worker.podTemplate.metadata.labels."
             "tfcompile.dev/role", "set by tfcompile")
    reported("activeDeadlineSeconds", "spec.roles.worker.podTemplate.spec.activeDeadlineSeconds",
             "spec.suspend")
    reported("args: [--flag]", "spec.roles.worker.podTemplate.spec.containers[0].args",
             "set spec.args, or roles.<role>.args")
    reported("nvidia.com/gpu: 1}", "spec.roles.worker.podTemplate.spec.containers[0].resources."
             "limits.nvidia.com/gpu", "roles.<role>.gpus")
    reported("tfcompile-state, emptyDir", "spec.roles.worker.podTemplate.spec.volumes[0].name",
             "choose another name")
    assert "Traceback" not in result.stderr


def test_a_secret_in_a_sidecars_env_is_refused_without_echoing_it(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    text = job("""\
        podTemplate:
          spec:
            containers:
            - name: uploader
              image: amazon/aws-cli:2.15.0
              env: [{name: AWS_SECRET_ACCESS_KEY, value: hunter2-very-secret}]
        """)
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert ("spec.podTemplate.spec.containers[0].env[0].value: the variable's name says it is a "
            "secret, and its value is written here") in result.stderr
    assert "hunter2" not in result.stderr


def test_owned_fields_of_a_valid_template_name_the_field_to_use(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    text = MISTAKES.replace("effct", "effect")
    path = write_job(text)
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 2
    for field, says in [
        ("spec.podTemplate.spec.restartPolicy", "always restart"),
        ("spec.podTemplate.spec.hostname", "names every pod"),
        ("spec.podTemplate.spec.containers[0].image", "set spec.image, or roles.<role>.image"),
        ("spec.podTemplate.spec.containers[0].env[0].name", "set by tfcompile"),
    ]:
        assert any(f": {field}: " in line and says in line
                   for line in result.stderr.splitlines()), (field, result.stderr)


NAMED_BY_PATH = """\
    storage:
      shared: {mountPath: /mnt/shared, size: 1Gi}
    podTemplate:
      spec:
        volumes:
        - name: outside
          persistentVolumeClaim: {claimName: ../../root}
        - name: settings
          configMap: {name: /etc}
        - name: token
          secret: {secretName: Token}
        - name: both
          projected:
            sources:
            - configMap: {name: fine}
            - secret: {name: "a/b"}
        - name: driver
          csi: {driver: files.csi.example.com, nodePublishSecretRef: {name: ..}}
        - name: fine
          persistentVolumeClaim: {claimName: datasets.v2}
    tensorboard:
      logDir: /mnt/shared/logs
      podTemplate:
        spec:
          volumes:
          - {name: extra, configMap: {}}
    """

CLAIMS_NAMED_BY_PATH = """\
    storage:
      shared: {mountPath: /mnt/shared, existingClaim: ../checkpoints}
      volumes:
      - {name: data, claimName: /srv/data, mountPath: /data, readOnly: true}
    """

NAME_RULE = ("a DNS subdomain: lowercase letters, digits, '-' and '.', starting and ending with "
             "a letter or digit, at most 253 characters")


def _located(result: Result, path: Path, field: str, message: str, value: str) -> None:
    """`result` reports `field: message` at the line and column of `value` in `path`."""
    text = path.read_text().splitlines()
    line = next(index for index, content in enumerate(text, 1) if value in content)
    expected = f"jobs/{path.name}:{line}:{text[line - 1].index(value) + 1}: {field}: {message}"
    assert expected in result.stderr.splitlines(), (expected, result.stderr)


def test_a_claim_config_map_or_secret_a_volume_names_is_a_name_never_a_path(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`run-local` makes a directory per claim name, and Kubernetes names these objects with a
    DNS subdomain: anything else, in a volume of any pod template, is refused, located."""
    monkeypatch.chdir(tmp_path)
    path = write_job(job(NAMED_BY_PATH, worker=f"""\
        podTemplate:
          spec:
            volumes: [{{name: cache, persistentVolumeClaim: {{claimName: {"x" * 254}}}}}]
        """))
    result = run_cli("build", "jobs", "-o", "out")
    assert result.status == 2, result.stderr

    def object_name(kind: str) -> str:
        return f"must be the name of a {kind}, {NAME_RULE} (a name, never a path)"

    volumes = "spec.podTemplate.spec.volumes"
    for field, kind, value in [
        (f"{volumes}[0].persistentVolumeClaim.claimName", "PersistentVolumeClaim", "../../root"),
        (f"{volumes}[1].configMap.name", "ConfigMap", "/etc"),
        (f"{volumes}[2].secret.secretName", "Secret", "Token"),
        (f"{volumes}[3].projected.sources[1].secret.name", "Secret", '"a/b"'),
        (f"{volumes}[4].csi.nodePublishSecretRef.name", "Secret", "..}"),
        ("spec.roles.worker.podTemplate.spec.volumes[0].persistentVolumeClaim.claimName",
         "PersistentVolumeClaim", "x" * 254),
    ]:
        _located(result, path, field, object_name(kind), value)
    _located(result, path, "spec.tensorboard.podTemplate.spec.volumes[0].configMap.name",
             f"the ConfigMap's name is required: {NAME_RULE}", "configMap: {}")
    assert "tfcompile: 7 problems found; nothing was written" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_claims_of_storage_are_names_never_paths(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_job(job(CLAIMS_NAMED_BY_PATH))
    result = run_cli("build", "jobs", "-o", "out")
    assert result.status == 2, result.stderr
    kubernetes_name = ("must be a Kubernetes object name: lowercase letters, digits, '-' and '.', "
                       "starting and ending with a letter or digit")
    _located(result, path, "spec.storage.shared.existingClaim", kubernetes_name, "../checkpoints")
    _located(result, path, "spec.storage.volumes[0].claimName", kubernetes_name, "/srv/data")
    assert "tfcompile: 2 problems found; nothing was written" in result.stderr


def test_the_editor_schema_checks_pod_templates() -> None:
    schema = json.loads(schema_text())
    validator = jsonschema.Draft202012Validator(schema)
    text = job(JOB_TEMPLATE, WORKER_TEMPLATE)
    document = YAML(typ="safe", pure=True).load(text)
    assert not list(validator.iter_errors(document))
    document["spec"]["podTemplate"]["spec"]["tolerations"][0]["effct"] = "NoSchedule"
    assert list(validator.iter_errors(document))


def test_the_gpu_component_appends_to_the_jobs_tolerations(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job(JOB_TEMPLATE + "overlays: [gpu, azure-smb]\n",
                                       WORKER_TEMPLATE))
    assert run_cli("build", str(jobs), "-o", str(tmp_path / "output"),
                   "--overlays", str(OVERLAYS)).status == 0
    rendered = subprocess.run(["kubectl", "kustomize", str(tmp_path / "output" / "demo")],
                              capture_output=True, text=True, check=True).stdout
    documents = {f"{d['kind']}/{d['metadata']['name']}": d
                 for d in YAML(typ="safe").load_all(rendered)}
    spec = documents["StatefulSet/demo-worker"]["spec"]["template"]["spec"]
    assert spec["tolerations"] == [
        {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "ml"},
        {"key": "spot", "operator": "Exists"},
        {"effect": "NoSchedule", "key": "sku", "operator": "Equal", "value": "gpu"},
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
    assert spec["nodeSelector"] == {"pool": "training", "gpu": "a100"}
    tensorflow = spec["containers"][0]
    assert tensorflow["name"] == "tensorflow"
    mounts = {m["mountPath"] for m in tensorflow["volumeMounts"]}
    assert {"/dev/shm", "/data", "/tmp"} <= mounts
    names = [v["name"] for v in tensorflow["env"]]
    assert names[-1] == "HDF5_USE_FILE_LOCKING" and "POD_IP" in names
    assert {"dshm", "dataset", "tfcompile-state"} <= {v["name"] for v in spec["volumes"]}


def test_running_as_root_needs_run_as_non_root_false(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    text = job("""\
        podTemplate:
          spec:
            securityContext: {runAsUser: 0}
            containers:
            - name: helper
              image: busybox:1.36
              securityContext: {runAsUser: 0, runAsNonRoot: false}
        """)
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 2
    lines = [line for line in result.stderr.splitlines() if "runAsUser" in line]
    assert len(lines) == 1, lines
    assert ("spec.podTemplate.spec.securityContext.runAsUser: user 0 under runAsNonRoot: true "
            "(tfcompile's default) never starts: add runAsNonRoot: false") in lines[0]
    fixed = text.replace("securityContext: {runAsUser: 0}",
                         "securityContext: {runAsUser: 0, runAsNonRoot: false}")
    assert run_cli("build", str(write_job(fixed)), "-o", str(tmp_path / "out")).status == 0


def test_the_order_of_keys_in_a_pod_template_changes_no_output(tmp_path: Path) -> None:
    def compiled(labels: str, selector: str) -> list[dict[str, Any]]:
        directory = tmp_path / labels.replace(" ", "").replace(":", "")[:8]
        directory.mkdir()
        return compile_job(directory, job(f"""\
            podTemplate:
              metadata: {{labels: {labels}}}
              spec:
                nodeSelector: {selector}
                containers:
                - name: tensorflow
                  resources: {{limits: {{memory: 1Gi, cpu: "2"}}}}
            """))

    first = compiled("{b: '1', a: '2'}", "{z: '1', y: '2'}")
    second = compiled("{a: '2', b: '1'}", "{y: '2', z: '1'}")
    assert json.dumps(first) == json.dumps(second)
    spec = template_of(first, "demo-worker")["spec"]
    assert list(spec["nodeSelector"]) == ["y", "z"]


WALKED_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "b"}},
    "spec": {
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": True},
        "nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "initContainers": [{"name": "init", "image": "busybox",
                            "securityContext": {"runAsUser": 1000},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "containers": [
            {"name": "tensorflow", "env": [{"name": "A", "value": "b"}],
             "resources": {"limits": {"cpu": "1"}}, "securityContext": {"runAsUser": 1000},
             "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            {"name": "side", "image": "busybox", "volumeMounts": [{"name": "data",
                                                                   "mountPath": "/data"}]},
        ],
    },
}
"""A pod template with every part the rules and the merge read: metadata, labels, the pod's and
the containers' security contexts, volumes, containers and init containers, env, resources,
mounts."""

INTEGER_KEY = "(integer key)"
WRONG_SHAPES: list[Any] = ["x", 1, True, None, [], ["x"], {}, {"x": 1}, INTEGER_KEY]
"""What each part is replaced by: a scalar, null, a list, a map, a map whose key is a number."""


def _parts(node: Any, path: tuple[str | int, ...] = ()) -> Any:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _parts(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _parts(value, (*path, index))


def _with(path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    template = json.loads(json.dumps(WALKED_TEMPLATE))
    node = template
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return template


def _keys_and_items(value: Any) -> Any:
    """Every key and list item of compiled objects."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys_and_items(item)
    elif isinstance(value, list):
        for item in value:
            yield item
            yield from _keys_and_items(item)


@pytest.mark.slow
def test_every_part_of_a_pod_template_in_the_wrong_shape_is_a_located_problem(
    tmp_path: Path,
) -> None:
    """Each part of a pod template, at job and at role level, replaced by a scalar, a list, a
    map, null or a map with a number for a key: a located problem, or a job whose objects have
    only string keys and no empty list item; never another exception."""
    path = tmp_path / "job.yaml"
    outcomes = {"refused": 0, "built": 0}
    for level in ("job", "role"):
        for part in _parts(WALKED_TEMPLATE):
            for value in WRONG_SHAPES:
                fragment = json.dumps(_with(part, value)).replace(
                    json.dumps(INTEGER_KEY), "{1: a}")
                if level == "job":
                    text = job_text(spec_lines=f"podTemplate: {fragment}")
                else:
                    text = job_text(roles=f"worker: {{replicas: 2, podTemplate: {fragment}}}")
                path.write_text(text, encoding="utf-8")
                try:
                    objects = [item for loaded in load_jobs(path)
                               for item in build_objects(loaded, shipped_launcher())]
                except SpecError as error:
                    assert all(problem.location.line >= 1 for problem in error.problems)
                    outcomes["refused"] += 1
                    continue
                for item in _keys_and_items(objects):
                    assert item is not None, (level, part, value)
                outcomes["built"] += 1
    assert outcomes["refused"] > 0 and outcomes["built"] > 0


@pytest.mark.parametrize(("fragment", "at", "field", "says"), [
    ("{spec: x}", "x}", "spec", "expected object (Kubernetes 1.33 schema)"),
    ("{spec: {initContainers: 1}}", "1}", "spec.initContainers", "expected array"),
    ("{spec: {containers: [null]}}", "null", "spec.containers[0]",
     "an empty list item (null), which the API server reads as an item with no fields; "
     "remove it or give its fields"),
    ("{metadata: {labels: {1: a}}}", "1: a", "metadata.labels.1",
     "a key of a Kubernetes object is a string: quote it"),
])
def test_a_pod_template_of_the_wrong_shape_is_refused_at_its_place(
    fragment: str, at: str, field: str, says: str, tmp_path: Path,
    run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = job_text(roles=f"worker: {{replicas: 2, podTemplate: {fragment}}}")
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = run_cli("build", "job.yaml", "-o", "output")
    assert result.status == 2, result.stderr
    expected = (f"job.yaml:{_line_column(text, at)}: spec.roles.worker.podTemplate.{field}: "
                f"{says}")
    assert expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
