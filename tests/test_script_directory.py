"""`script:` may name a folder (a training package): every file under it is shipped in the
ConfigMap under a flat key, and the volume's `items` put each back at its nested path, so the
entrypoint that `command` runs imports its modules. Whatever cannot be shipped is refused at the
`script:` value, naming its relative path and nothing of its content."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, job_text
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.spec.scripts import MAXIMUM_FOLDER_DEPTH, MAXIMUM_SCRIPT_BYTES

COMMAND = "[python, /opt/tfcompile/script/main.py]"
MARKER = "MARKER-4711-must-not-leak"


def _repository(tmp_path: Path, command: str | None = COMMAND) -> Path:
    """A repository with a job whose `train/` package has an entrypoint and a nested module;
    returns the job file."""
    repository = tmp_path / "repo"
    package = repository / "jobs" / "demo" / "train"
    (package / "model" / "layers").mkdir(parents=True)
    (repository / ".git").mkdir()
    (repository / ".git" / "config").write_text(MARKER, encoding="utf-8")
    (package / "main.py").write_text(
        "import sys\nfrom model.layers.dense import width\n"
        "print('width', width(), sys.argv[1:])\n", encoding="utf-8")
    (package / "model" / "__init__.py").write_text("", encoding="utf-8")
    (package / "model" / "layers" / "__init__.py").write_text("", encoding="utf-8")
    (package / "model" / "layers" / "dense.py").write_text(
        "def width() -> int:\n    return 7\n", encoding="utf-8")
    job = repository / "jobs" / "demo" / "job.yaml"
    job.write_text(job_text(script="train/", command=command), encoding="utf-8")
    return job


def test_a_package_is_shipped_with_its_nested_paths_and_runs(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    job = _repository(tmp_path)
    output = tmp_path / "output"
    result = run_cli("build", str(job), "-o", str(output))
    assert result.status == 0, result.stderr
    assert run_cli("validate", str(output / "demo")).status == 0
    rendered: list[Any] = parse_manifests(render(output / "demo"))  # `kubectl kustomize`
    [config_map] = [d for d in rendered if d["kind"] == "ConfigMap"
                    and "-script-" in d["metadata"]["name"]]
    data = config_map["data"]
    assert isinstance(data, dict)
    assert sorted(data) == ["main.py", "model____init__.py", "model__layers____init__.py",
                            "model__layers__dense.py"]
    [statefulset] = [d for d in rendered if d["kind"] == "StatefulSet"]
    spec = statefulset["spec"]["template"]["spec"]
    [volume] = [v for v in spec["volumes"] if v["name"] == "script"]
    assert volume["configMap"] == {"name": config_map["metadata"]["name"],
                                   "items": [
        {"key": "main.py", "path": "main.py"},
        {"key": "model____init__.py", "path": "model/__init__.py"},
        {"key": "model__layers____init__.py", "path": "model/layers/__init__.py"},
        {"key": "model__layers__dense.py", "path": "model/layers/dense.py"}]}
    [container] = [c for c in spec["containers"] if c["name"] == "tensorflow"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "script"]
    # Lay the files out as the kubelet does, and run the command the launcher runs.
    mounted = tmp_path / "mounted"
    for item in volume["configMap"]["items"]:
        target = mounted / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[item["key"]], encoding="utf-8")
    command = [sys.executable if word == "python" else
               word.replace(mount["mountPath"], str(mounted)) for word in container["args"]
               if word.startswith(("python", mount["mountPath"]))]
    assert command[1:] == [str(mounted / "main.py")]
    ran = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60,
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "width 7 []\n"
    # `python -m` form: the mount on PYTHONPATH, from any working directory.
    ran = subprocess.run([sys.executable, "-m", "model.layers.dense"], capture_output=True,
                         text=True, check=False, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(mounted)})
    assert ran.returncode == 0, ran.stderr
    assert MARKER not in result.stdout + result.stderr


def test_every_path_and_content_changes_the_configmap_name(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    job = _repository(tmp_path)
    names = []
    package = job.parent / "train"
    changes: list[Callable[[], object]] = [
        lambda: None,
        lambda: (package / "model" / "layers" / "dense.py").write_text(
            "def width() -> int:\n    return 8\n", encoding="utf-8"),
        lambda: (package / "model" / "layers" / "dense.py").rename(
            package / "model" / "layers" / "wide.py"),
    ]
    for step, change in enumerate(changes):
        change()
        output = tmp_path / f"output{step}"
        assert run_cli("build", str(job), "-o", str(output)).status == 0
        [config_map] = output.glob("demo/configmap-demo-script-*.yaml")
        names.append(config_map.name)
    assert len(set(names)) == 3


def _fifo(package: Path) -> None:
    os.mkfifo(package / "model" / "pipe.py")


def _git(package: Path) -> None:
    (package / "model" / ".git").mkdir()
    (package / "model" / ".git" / "config").write_text(MARKER, encoding="utf-8")


def _leaving_symlink(package: Path) -> None:
    outside = package.parents[3] / "outside.py"
    outside.write_text(MARKER, encoding="utf-8")
    (package / "model" / "secret.py").symlink_to(outside)


def _into_git(package: Path) -> None:
    (package / "config.py").symlink_to(package.parents[2] / ".git" / "config")


def _bad_key(package: Path) -> None:
    (package / "model" / "my layer.py").write_text(MARKER, encoding="utf-8")


def _collision(package: Path) -> None:
    (package / "model__layers__dense.py").write_text(MARKER, encoding="utf-8")


def _too_big(package: Path) -> None:
    for name in ("a.py", "b.py"):  # sparse, each under the limit, together over it
        with (package / name).open("wb") as handle:
            handle.truncate(MAXIMUM_SCRIPT_BYTES // 2 + 1)


def _hard_link_to_git(package: Path) -> None:
    os.link(package.parents[2] / ".git" / "config", package / "model" / "config.py")


def _hard_link_inside(package: Path) -> None:
    os.link(package / "main.py", package / "model" / "main.py")


def _deep(levels: int) -> Callable[[Path], None]:
    """Folders `levels` deep under the package, a module at the bottom. Made one level at a
    time relative to the last, since the whole path may be longer than the system allows."""
    def prepare(package: Path) -> None:
        descriptor = os.open(package, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(levels):
                os.mkdir("d", dir_fd=descriptor)
                deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
                os.close(descriptor)
                descriptor = deeper
            module = os.open("m.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=descriptor)
            os.write(module, MARKER.encode())
            os.close(module)
        finally:
            os.close(descriptor)
    return prepare


def _binary(package: Path) -> None:
    (package / "model" / "__pycache__").mkdir()
    (package / "model" / "__pycache__" / "layers.pyc").write_bytes(
        b"\xff\xfe\x00" + MARKER.encode())


REFUSALS = [
    ("a FIFO", _fifo, "model/pipe.py: not a regular file"),
    ("a .git inside", _git, "model/.git: .git is never shipped"),
    ("a symlink leaving the repository", _leaving_symlink,
     "model/secret.py: a symlink out of the job's repository"),
    ("a symlink into .git", _into_git, "config.py: a symlink out of the job's repository"),
    ("a name that is not a key", _bad_key,
     "model/my layer.py: the name (with '/' as '__') is not a valid ConfigMap key"),
    ("two files on one key", _collision,
     "model/layers/dense.py and model__layers__dense.py would share the ConfigMap key "
     "model__layers__dense.py"),
    ("too big in total", _too_big, "the folder's 6 files and their keys are "),
    ("a file that is not text", _binary, "model/__pycache__/layers.pyc is not UTF-8 text"),
    ("a hard link to .git/config", _hard_link_to_git,
     "model/config.py: has 2 hard links: another name on this machine is the same file"),
    ("a second name of a file of the package", _hard_link_inside,
     "main.py: has 2 hard links"),
    ("folders a level too deep", _deep(MAXIMUM_FOLDER_DEPTH + 1),
     f"{'d/' * MAXIMUM_FOLDER_DEPTH}d: a folder more than {MAXIMUM_FOLDER_DEPTH} levels below "
     f"the script folder; allowed: folders at most {MAXIMUM_FOLDER_DEPTH} levels deep"),
]


@pytest.mark.parametrize(("name", "prepare", "says"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_a_package_cannot_ship_is_refused_by_its_path(
    name: str, prepare: Callable[[Path], None], says: str, tmp_path: Path,
    run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = _repository(tmp_path)
    prepare(job.parent / "train")
    monkeypatch.chdir(job.parent)
    result = run_cli("build", "job.yaml", "-o", "output")
    assert result.status == 2, result.stderr
    assert "job.yaml:7:11: spec.script: " + says in result.stderr, result.stderr
    assert MARKER not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not (job.parent / "output").exists()


def test_the_total_size_is_given(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    job = _repository(tmp_path)
    _too_big(job.parent / "train")
    result = run_cli("build", str(job), "-o", str(tmp_path / "output"))
    files = sorted(path for path in (job.parent / "train").rglob("*") if path.is_file())
    total = sum(path.stat().st_size + len(str(path.relative_to(job.parent / "train"))
                                          .replace("/", "__")) for path in files)
    assert f"the folder's {len(files)} files and their keys are {total} bytes" in result.stderr


def test_a_package_needs_a_command(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    job = _repository(tmp_path, command=None)
    result = run_cli("build", str(job), "-o", str(tmp_path / "output"))
    assert result.status == 2
    assert ("spec.script: names a folder, so there is no single file to run: set spec.command "
            "to run its entrypoint, for example command: [python, "
            "/opt/tfcompile/script/<entrypoint>.py]") in result.stderr


def test_a_symlink_to_a_file_inside_the_repository_is_shipped_under_its_own_path(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    job = _repository(tmp_path)
    shared = job.parents[2] / "shared"
    shared.mkdir()
    (shared / "common.py").write_text("VALUE = 3\n", encoding="utf-8")
    (job.parent / "train" / "model" / "common.py").symlink_to(Path("../../../../shared/common.py"))
    output = tmp_path / "output"
    assert run_cli("build", str(job), "-o", str(output)).status == 0
    [config_map] = output.glob("demo/configmap-demo-script-*.yaml")
    assert "  model__common.py: |\n    VALUE = 3\n" in config_map.read_text(encoding="utf-8")
    statefulset = (output / "demo" / "statefulset-demo-worker.yaml").read_text(encoding="utf-8")
    assert "- key: model__common.py\n            path: model/common.py\n" in statefulset


def _remove_deep(package: Path, levels: int) -> None:
    """Remove what `_deep(levels)` made, bottom up, one level at a time."""
    descriptors = [os.open(package, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for _ in range(levels):
            descriptors.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY,
                                       dir_fd=descriptors[-1]))
        os.unlink("m.py", dir_fd=descriptors[-1])
        while len(descriptors) > 1:
            os.close(descriptors.pop())
            os.rmdir("d", dir_fd=descriptors[-1])
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def test_folders_1100_levels_deep_are_a_located_problem(
    tmp_path: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = _repository(tmp_path)
    package = job.parent / "train"
    _deep(1100)(package)
    try:
        monkeypatch.chdir(job.parent)
        result = run_cli("build", "job.yaml", "-o", "output")
    finally:
        _remove_deep(package, 1100)
    assert result.status == 2, result.stderr
    assert (f"job.yaml:7:11: spec.script: {'d/' * MAXIMUM_FOLDER_DEPTH}d: a folder more than "
            f"{MAXIMUM_FOLDER_DEPTH} levels below the script folder") in result.stderr
    assert not (job.parent / "output").exists()


def test_folders_as_deep_as_allowed_are_shipped(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    job = _repository(tmp_path)
    _deep(MAXIMUM_FOLDER_DEPTH)(job.parent / "train")
    output = tmp_path / "output"
    result = run_cli("build", str(job), "-o", str(output))
    assert result.status == 0, result.stderr
    [config_map] = output.glob("demo/configmap-demo-script-*.yaml")
    assert f"{'d__' * MAXIMUM_FOLDER_DEPTH}m.py:" in config_map.read_text(encoding="utf-8")
