"""Mount paths are judged where they mount, not as they are written: another spelling of
tfcompile's folder or of the service-account token's (`//`, `.`, `..`, a `/` at the end, a
relative path) is refused as the path itself is, and so is a mount around them; a path written
otherwise than it is mounted is refused, never changed. Each refusal is located at the value,
names the field and says what is allowed."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result, job_text
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.spec.loading import load_jobs
from tfcompile.spec.mount_paths import (
    RESERVED_MOUNT_PATH,
    TOKEN_DIRECTORIES,
    inside,
    mounted_path,
)

LAUNCHER_SPELLINGS = [
    "//opt/tfcompile/launcher", "/opt/tfcompile/./launcher", "/opt/tfcompile/launcher/",
    "/opt/x/../tfcompile/launcher", "opt/tfcompile/launcher", "///opt//tfcompile//launcher",
    "/opt/tfcompile", "/opt/tfcompile/state", "/opt/tfcompile/script", "/opt/tfcompile/home/x",
    "/opt", "/", "//",
]
"""At, inside or around tfcompile's folder, as written and otherwise."""

TOKEN_SPELLINGS = [
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "//var/run/secrets/kubernetes.io/serviceaccount/",
    "/var/run/secrets/kubernetes.io/./serviceaccount",
    "var/run/secrets/kubernetes.io/serviceaccount",
    "/var/run/secrets/kubernetes.io/serviceaccount/token",
    "/var/run/secrets", "/var/run", "/var",
    "/run/secrets/kubernetes.io/serviceaccount", "/run/secrets", "/run", "/run/",
]
"""At, inside or around the service-account token's folder, through /var/run or /run."""

NOT_AS_MOUNTED = ["/data/", "//data", "data", "/a/./data", "/a/../data", "/a//data"]


def _pod_template(mount_path: str, container: str = "tensorflow",
                  kind: str = "containers") -> str:
    return textwrap.dedent(f"""\
        podTemplate:
          spec:
            volumes: [{{name: extra, emptyDir: {{}}}}]
            {kind}:
            - name: {container}
              {"image: busybox" if container != "tensorflow" else "env: []"}
              volumeMounts: [{{name: extra, mountPath: "{mount_path}"}}]
        """)


def _located(result: Result, text: str, field: str, says: str) -> None:
    """The build refused the job with exit 2, pointing at the mount path's value."""
    assert result.status == 2, result.stderr
    assert "Traceback" not in result.stderr
    line_index, line = next((index, line) for index, line in enumerate(text.splitlines())
                            if 'Path: "' in line)
    column = line.index('Path: "') + len("Path: ") + 1
    expected = f"job.yaml:{line_index + 1}:{column}: {field}: "
    assert any(expected in row and says in row for row in result.stderr.splitlines()), (
        f"expected {expected!r} with {says!r}; got:\n{result.stderr}")


def _build(run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
           text: str) -> Result:
    return run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))


@pytest.mark.parametrize("mount_path", LAUNCHER_SPELLINGS)
@pytest.mark.parametrize("container", ["tensorflow", "sidecar"])
def test_a_pod_template_mount_over_tfcompile_folder_is_refused_however_written(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    mount_path: str, container: str,
) -> None:
    text = job_text(spec_lines=_pod_template(mount_path, container))
    _located(_build(run_cli, write_job, tmp_path, text), text,
             "spec.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
             f"{RESERVED_MOUNT_PATH} is where tfcompile mounts its launcher")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mount_path", TOKEN_SPELLINGS)
def test_a_mount_over_the_token_in_the_tensorflow_container_is_refused(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    mount_path: str,
) -> None:
    """A role's own pod template too: the launcher must find the token wherever it runs."""
    text = job_text(roles="worker:\n  replicas: 2\n"
                    + textwrap.indent(_pod_template(mount_path), "  "))
    _located(_build(run_cli, write_job, tmp_path, text), text,
             "spec.roles.worker.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
             "leaves the launcher without the API server: choose a path apart from them")


@pytest.mark.parametrize(("kind", "container"), [("containers", "sidecar"),
                                                 ("initContainers", "prepare")])
def test_other_containers_may_mount_around_the_token(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    kind: str, container: str,
) -> None:
    """Only the `tensorflow` container runs the launcher: a sidecar sharing /var/run (for a
    socket) hides only its own token."""
    text = job_text(spec_lines=_pod_template("/var/run", container, kind))
    result = _build(run_cli, write_job, tmp_path, text)
    assert result.status == 0, result.stderr


@pytest.mark.parametrize("field", ["shared", "scratch", "volume"])
@pytest.mark.parametrize("mount_path", ["//opt/tfcompile/launcher", "/opt/tfcompile/state/",
                                        "/opt", "//var/run/secrets/kubernetes.io/serviceaccount",
                                        "/run/secrets", "/var/run/"])
def test_a_storage_mount_over_tfcompile_folder_or_the_token_is_refused(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    field: str, mount_path: str,
) -> None:
    storage = {
        "shared": f'storage:\n  shared: {{mountPath: "{mount_path}", size: 1Gi}}',
        "scratch": f'storage:\n  scratch: {{mountPath: "{mount_path}"}}',
        "volume": ("storage:\n  volumes:\n  - {name: data, claimName: data, readOnly: true, "
                   f'mountPath: "{mount_path}"}}'),
    }[field]
    path = {"shared": "spec.storage.shared.mountPath", "scratch": "spec.storage.scratch.mountPath",
            "volume": "spec.storage.volumes[0].mountPath"}[field]
    text = job_text(spec_lines=storage)
    _located(_build(run_cli, write_job, tmp_path, text), text, path,
             "apart from it" if "tfcompile" in mount_path or mount_path == "/opt"
             else "leaves the launcher without the API server")


@pytest.mark.parametrize("mount_path", NOT_AS_MOUNTED)
def test_a_mount_path_written_otherwise_than_it_is_mounted_is_refused(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    mount_path: str,
) -> None:
    """Refused, not changed: the spec, the output and Kubernetes' merge of mounts by their path
    then all read one path."""
    for container in ("tensorflow", "sidecar"):
        text = job_text(spec_lines=_pod_template(mount_path, container))
        _located(_build(run_cli, write_job, tmp_path, text), text,
                 "spec.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
                 "refused rather than changed; allowed: an absolute path as it is mounted")
    text = job_text(spec_lines=f'storage:\n  scratch: {{mountPath: "{mount_path}"}}')
    result = _build(run_cli, write_job, tmp_path, text)
    assert result.status == 2 and "spec.storage.scratch.mountPath: " in result.stderr


def test_mount_paths_written_as_they_mount_build(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
) -> None:
    text = job_text(spec_lines=_pod_template("/data") + textwrap.dedent("""\
        storage:
          shared: {mountPath: /mnt/shared, size: 1Gi}
          scratch: {mountPath: /var/scratch}
          volumes: [{name: models, claimName: models, readOnly: true, mountPath: /opt/models}]
        """))
    result = _build(run_cli, write_job, tmp_path, text)
    assert result.status == 0, result.stderr


def test_tensorboard_and_device_paths_are_judged_where_they_mount(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
) -> None:
    tensorboard = textwrap.dedent("""\
        storage: {shared: {mountPath: /mnt/shared, size: 1Gi}}
        tensorboard:
          logDir: /mnt/shared/logs
          podTemplate:
            spec:
              volumes: [{name: extra, emptyDir: {}}]
              containers:
              - name: tensorboard
                volumeMounts: [{name: extra, mountPath: "//opt/tfcompile/home"}]
        """)
    text = job_text(spec_lines=tensorboard)
    _located(_build(run_cli, write_job, tmp_path, text), text,
             "spec.tensorboard.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
             "is where tfcompile mounts")
    device = _pod_template("/x").replace(
        'volumeMounts: [{name: extra, mountPath: "/x"}]',
        'volumeDevices: [{name: extra, devicePath: "/opt/tfcompile/./launcher"}]')
    text = job_text(spec_lines=device)
    _located(_build(run_cli, write_job, tmp_path, text), text,
             "spec.podTemplate.spec.containers[0].volumeDevices[0].devicePath",
             "is where tfcompile mounts")


def test_the_reserved_paths_are_where_the_compiler_mounts(tmp_path: Path) -> None:
    """Every folder tfcompile mounts in a TensorFlow container (launcher, state, script, HOME)
    and TensorBoard's HOME are inside the reserved folder; /tmp and the job's storage are the
    only others."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text(job_text(script="train.py", command=None, spec_lines=(
        "storage: {shared: {mountPath: /mnt/shared, size: 1Gi}}\n"
        "tensorboard: {logDir: /mnt/shared/logs}")))
    (loaded,) = load_jobs(tmp_path / "job.yaml")
    mounted = {mount["name"]: mount["mountPath"]
               for item in build_objects(loaded, shipped_launcher())
               if item["kind"] in ("StatefulSet", "Deployment")
               for container in item["spec"]["template"]["spec"]["containers"]
               for mount in container.get("volumeMounts", [])}
    for name in ("tfcompile-launcher", "tfcompile-state", "script", "tfcompile-home"):
        assert inside(mounted.pop(name), RESERVED_MOUNT_PATH), name
    assert mounted == {"tfcompile-tmp": "/tmp", "shared": "/mnt/shared"}


@pytest.mark.parametrize(("written", "mounted"), [
    ("//opt/tfcompile", "/opt/tfcompile"), ("///opt", "/opt"), ("/opt/./x/", "/opt/x"),
    ("/a/../../b", "/b"), ("opt/x", "/opt/x"), ("", "/"), ("//", "/"), ("/", "/"),
])
def test_a_mount_path_is_read_as_the_kubelet_and_runtime_read_it(written: str,
                                                                 mounted: str) -> None:
    assert mounted_path(written) == mounted


def test_the_token_folder_is_reserved_through_var_run_and_run() -> None:
    assert TOKEN_DIRECTORIES == ("/var/run/secrets/kubernetes.io/serviceaccount",
                                 "/run/secrets/kubernetes.io/serviceaccount")
