"""Reasons a local run is refused before anything is created, each saying what to do."""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import pytest

from tfcompile.compiler.local_run import LocalRunOptions, preflight, run_pods, volumes
from tfcompile.compiler.rendering.pods import (
    Container,
    EnvironmentReference,
    Pod,
    Volume,
    VolumeMount,
)

STATE = Volume("tfcompile-state", "emptyDir", {})


def container(name: str = "tensorflow", command: list[str] | None = None,
              unresolved: list[EnvironmentReference] | None = None,
              mounts: list[VolumeMount] | None = None) -> Container:
    return Container(name=name, image="i", command=["python"] if command is None else command,
                     args=[], environment={}, unresolved=unresolved or [],
                     volume_mounts=mounts or [], ports=[], working_dir=None, resources={})


def pod(name: str, containers: list[Container], pod_volumes: list[Volume] | None = None) -> Pod:
    return Pod(name=name, namespace=None, owner_kind="StatefulSet", owner_name="j-worker",
               index=0, hostname=name, subdomain="j-worker", labels={}, annotations={},
               containers=containers, init_containers=[],
               volumes=[STATE] if pod_volumes is None else pod_volumes,
               restart_policy="Always", termination_grace_period_seconds=30)


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda program, path=None: f"/bin/{program}")


def test_without_root_the_run_is_refused_with_exit_2_and_nothing_created(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    errors = io.StringIO()
    outcome = run_pods([pod("j-worker-0", [container()])],
                       LocalRunOptions(errors=errors, temporary_directory=tmp_path))
    assert outcome.exit_code == 2
    assert outcome.ending == "refused"
    assert "run-local: error: run-local needs root" in errors.getvalue()
    assert "sudo" in errors.getvalue()
    assert list(tmp_path.iterdir()) == []


def test_without_podman_the_run_says_how_to_install_it(
        as_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda program, path=None: None)
    problems = preflight.find_problems([pod("j-worker-0", [container()])], LocalRunOptions())
    assert problems == ["run-local runs each pod in its image with podman, which is not "
                        "installed: install podman (Debian/Ubuntu: apt-get install podman; "
                        "Fedora: dnf install podman)"]


def test_unresolved_secrets_are_each_named_with_how_to_supply_them(as_root: None) -> None:
    key = EnvironmentReference("Secret", "s3-credentials", "secret", optional=False)
    whole = EnvironmentReference("Secret", "registry", None, optional=False)
    optional = EnvironmentReference("Secret", "maybe", "k", optional=True)
    config = EnvironmentReference("ConfigMap", "settings", "mode", optional=False)
    pods = [pod("j-worker-0", [container(unresolved=[key, whole, optional])]),
            pod("j-worker-1", [container(unresolved=[key, config])])]
    assert preflight.find_problems(pods, LocalRunOptions()) == [
        "Secret s3-credentials key secret is needed by j-worker-0/tensorflow, "
        "j-worker-1/tensorflow and is not supplied: add a line "
        "`s3-credentials/secret=VALUE` to the secrets file (--secrets FILE)",
        "Secret registry (all keys, by envFrom) is needed by j-worker-0/tensorflow and is not "
        "supplied: add one `registry/KEY=VALUE` line per key to the secrets file "
        "(--secrets FILE)",
        "ConfigMap settings key mode is needed by j-worker-1/tensorflow and is not among the "
        "rendered manifests: add it to the job's manifests, or mark the reference optional",
    ]


def test_pods_volumes_and_success_pods_are_checked(as_root: None) -> None:
    mounts = [VolumeMount("script", "/opt/script", False, "../escape"),
              VolumeMount("nowhere", "/x", False, None),
              VolumeMount("data", "relative/path", False, None)]
    pods = [
        pod("j-worker-0", [dataclasses.replace(container(command=[], mounts=mounts), image="")],
            [Volume("script", "configMap", {"name": "j-script"}),
             Volume("data", "hostPath", {"path": "/data"}),
             Volume("token", "secret", {"secretName": "api-token"})]),
        pod("j-worker-1", [container()]),
        pod("j-worker-1", [container()]),
    ]
    problems = preflight.find_problems(pods, LocalRunOptions(success_pods=["j-chief-0",
                                                                           "j-worker-0"]))
    assert problems == [
        "more than one pod is named j-worker-1",
        "pod j-worker-0, container tensorflow: has no image",
        "pod j-worker-0: volume script needs ConfigMap j-script, which is not available: it is "
        "not among the rendered manifests",
        "pod j-worker-0: volume data: hostPath volumes are not supported by a local run "
        "(supported: emptyDir, persistentVolumeClaim, configMap, secret)",
        "pod j-worker-0: volume token needs Secret api-token, which is not available: supply "
        "its keys in the secrets file (--secrets FILE), one `api-token/KEY=VALUE` line per key",
        "pod j-worker-0: container tensorflow, mount /opt/script: subPath '../escape' must not "
        "contain '..'",
        "pod j-worker-0: container tensorflow, mount /x: there is no volume named nowhere",
        "pod j-worker-0: container tensorflow, mount relative/path: the mount path must be "
        "absolute",
        "pod j-chief-0, whose success should end the run, is not among the pods",
        "pod j-worker-0: its success cannot be seen: it has no emptyDir volume named "
        "tfcompile-state for the success marker",
    ]


def test_projected_files_follow_items_and_modes() -> None:
    volume = Volume("settings", "configMap", {
        "name": "cm", "defaultMode": 0o600,
        "items": [{"key": "a", "path": "dir/a.txt"}, {"key": "b", "path": "b", "mode": 0o644},
                  {"key": "missing", "path": "m"}, {"key": "a", "path": "/abs"}]})
    files, problems = volumes.projected_files(volume, {"cm": {"a": "1", "b": "2", "c": "3"}}, {})
    assert files == [volumes.ProjectedFile("dir/a.txt", "1", 0o600),
                     volumes.ProjectedFile("b", "2", 0o644)]
    assert problems == ["volume settings: ConfigMap cm has no key 'missing'",
                        "volume settings: item path '/abs' must be relative"]
    secret = Volume("token", "secret", {"secretName": "api"})
    files, problems = volumes.projected_files(secret, {}, {("api", "t"): "v", ("x", "t"): "w"})
    assert (files, problems) == ([volumes.ProjectedFile("t", "v", 0o644)], [])
    optional = Volume("o", "configMap", {"name": "absent", "optional": True})
    assert volumes.projected_files(optional, {}, {}) == ([], [])


NAMED_BY_PATH = [
    Volume("data", "persistentVolumeClaim", {"claimName": "../../etc"}),
    Volume("root", "persistentVolumeClaim", {"claimName": "/root"}),
    Volume("none", "persistentVolumeClaim", {}),
    Volume("settings", "configMap", {"name": "a/b"}),
    Volume("token", "secret", {"secretName": ".."}),
    Volume("both", "projected", {"sources": [{"configMap": {"name": "ok"}},
                                             {"secret": {"name": "Upper"}}]}),
    Volume("driver", "csi", {"driver": "x", "nodePublishSecretRef": {"name": "x" * 254}}),
]


def test_a_volume_naming_an_object_by_anything_but_a_name_refuses_the_run(
        as_root: None, tmp_path: Path) -> None:
    """A claim's directory is `<claims>/<claimName>`: a name that is a path would make run-local
    change the owner and mode of a host directory and mount it into the pod."""
    rule = ("a DNS subdomain: lowercase letters, digits, '-' and '.', starting and ending with "
            "a letter or digit, at most 253 characters")
    errors = io.StringIO()
    outcome = run_pods([pod("j-worker-0", [container()], [STATE, *NAMED_BY_PATH])],
                       LocalRunOptions(errors=errors, temporary_directory=tmp_path))
    assert outcome.exit_code == 2
    assert [problem for problem in outcome.problems if "volume" in problem] == [
        f"pod j-worker-0: volume data: persistentVolumeClaim.claimName: must be the name of a "
        f"PersistentVolumeClaim, {rule} (a name, never a path)",
        f"pod j-worker-0: volume root: persistentVolumeClaim.claimName: must be the name of a "
        f"PersistentVolumeClaim, {rule} (a name, never a path)",
        f"pod j-worker-0: volume none: persistentVolumeClaim.claimName: the "
        f"PersistentVolumeClaim's name is required: {rule}",
        f"pod j-worker-0: volume settings: configMap.name: must be the name of a ConfigMap, "
        f"{rule} (a name, never a path)",
        f"pod j-worker-0: volume token: secret.secretName: must be the name of a Secret, "
        f"{rule} (a name, never a path)",
        f"pod j-worker-0: volume both: projected.sources[1].secret.name: must be the name of a "
        f"Secret, {rule} (a name, never a path)",
        f"pod j-worker-0: volume driver: csi.nodePublishSecretRef.name: must be the name of a "
        f"Secret, {rule} (a name, never a path)",
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_kept_claim_directory_that_is_a_link_refuses_the_run(
        as_root: None, tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    claims.mkdir()
    os.symlink("/etc", claims / "data")
    (claims / "file").write_text("")
    pods = [pod("j-worker-0", [container()],
                [STATE, Volume("data", "persistentVolumeClaim", {"claimName": "data"}),
                 Volume("file", "persistentVolumeClaim", {"claimName": "file"})])]
    problems = preflight.find_problems(pods, LocalRunOptions(claims_directory=claims))
    assert problems == [
        f"pod j-worker-0: volume data: the claim's directory {claims / 'data'} is a symbolic "
        "link; run-local follows no link in the claims directory: make it a directory of its "
        "own",
        f"pod j-worker-0: volume file: the claim's directory {claims / 'file'} is not a "
        "directory; run-local follows no link in the claims directory: make it a directory of "
        "its own",
    ]


def _modes(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.lstat().st_mode, p.lstat().st_gid) for p in [path, *path.rglob("*")]}


def test_volumes_change_owners_and_modes_only_inside_their_own_directories(
        tmp_path: Path) -> None:
    """A kept claim shared with the pod's fsGroup: whatever a pod left there (a link to a host
    directory or file) is not followed; a name that is a path or a claim directory that is a
    link is refused again when the volumes are made (should preflight have been skipped)."""
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    (outside / "private").write_text("root's")
    (outside / "private").chmod(0o600)
    claims = tmp_path / "claims"
    kept = claims / "data"
    kept.mkdir(parents=True)
    (kept / "written").write_text("by the pod")
    (kept / "written").chmod(0o600)
    os.symlink(outside, kept / "to-a-directory")
    os.symlink(outside / "private", kept / "to-a-file")
    before = _modes(outside)
    shared = pod("j-worker-0", [container()],
                 [Volume("data", "persistentVolumeClaim", {"claimName": "data"})])
    shared = dataclasses.replace(shared, spec={"securityContext": {"fsGroup": 0}})
    volumes.prepare_pod_volumes(shared, tmp_path / "volumes", claims, {}, {})
    assert (kept / "written").stat().st_mode & 0o7777 == 0o660
    assert kept.stat().st_mode & 0o2070 == 0o2070
    assert _modes(outside) == before
    for claim_name in ("../outside", str(outside), "link"):
        if claim_name == "link":
            os.symlink(outside, claims / "link")
        named = pod("j-worker-0", [container()],
                    [Volume("data", "persistentVolumeClaim", {"claimName": claim_name})])
        named = dataclasses.replace(named, spec={"securityContext": {"fsGroup": 0}})
        with pytest.raises(OSError):
            volumes.prepare_pod_volumes(named, tmp_path / "volumes", claims, {}, {})
    assert _modes(outside) == before
