"""`tfcompile-kustomize`: Kustomize's library in one process renders as `kustomize build` does.

The server (scripts/kustomize/render, built by `scripts/control-plane.sh build --gitops argocd`
from the same module as the kustomize binary) is compared byte for byte with that binary, one
server answering every directory in turn: the committed examples, jobs with components, a
kustomization with its own OpenAPI schema followed by jobs that need the built-in one (the
library keeps its schema between renderings), `sortOptions`, a failure, and a directory named
from another working directory. `validate` gives the same reports with it and without it (a
server for each worker process, not each job), and a server that stops leaves the rendering to
the kustomize command, and none outlives the process that started it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import OUTPUT, OVERLAYS, REPOSITORY, Result, job_text
from tfcompile.compiler.checking.validation.many_jobs import validate_many
from tfcompile.compiler.rendering import render_server
from tfcompile.compiler.rendering.kustomize import Renderer, RenderError, render

pytestmark = pytest.mark.slow


def built_binary(name: str) -> Path:
    found = subprocess.run(["bash", str(REPOSITORY / "scripts" / "control-plane.sh"),
                            f"{name}-binary"], capture_output=True, text=True, check=True)
    path = Path(found.stdout.strip())
    assert os.access(path, os.X_OK), (
        f"{path} is not built: run `bash scripts/control-plane.sh build --gitops argocd`")
    return path


@pytest.fixture(scope="module")
def server() -> Path:
    return built_binary("kustomize-server")


@pytest.fixture(scope="module")
def kustomize() -> Path:
    return built_binary("kustomize")


@pytest.fixture
def server_on_path(server: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("PATH", f"{server.parent}{os.pathsep}{os.environ['PATH']}")
    yield server


class Session:
    """One server process, asked directory after directory, as `render_server` asks it."""

    def __init__(self, program: Path) -> None:
        self.process = subprocess.Popen([str(program)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)

    def ask(self, directory: str, working_directory: Path) -> tuple[bool, bytes]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"directory": directory, "workingDirectory": str(working_directory)}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        header = json.loads(self.process.stdout.readline())
        return header["ok"], self.process.stdout.read(header["size"])

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=60)


def kustomize_build(kustomize: Path, directory: str, working_directory: Path
                    ) -> tuple[bool, bytes]:
    """What `kustomize build` prints: the rendering, or the error after its `Error: `."""
    done = subprocess.run([str(kustomize), "build", directory], capture_output=True,
                          cwd=working_directory, check=False)
    if done.returncode == 0:
        return True, done.stdout
    return False, done.stderr.removeprefix(b"Error: ").removesuffix(b"\n")


CUSTOM_SCHEMA = {"definitions": {"v1alpha1.Pipeline": {
    "properties": {"spec": {"properties": {"steps": {
        "items": {"type": "object"}, "type": "array",
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}},
        "type": "object"}},
    "type": "object",
    "x-kubernetes-group-version-kind": [
        {"group": "example.com", "kind": "Pipeline", "version": "v1alpha1"}]}}}


def directories(tmp_path: Path, run_cli: Callable[..., Result]) -> list[Path]:
    """Kustomizations of every shape the comparison covers, in the order they are asked."""
    jobs = tmp_path / "jobs"
    for name, overlays in (("gpu-azure", "gpu, azure"), ("smb", "gpu, azure-smb")):
        (jobs / name).mkdir(parents=True)
        (jobs / name / "job.yaml").write_text(job_text(
            name, spec_lines=f"overlays: [{overlays}]\n"
            "storage:\n  shared: {mountPath: /mnt/shared, size: 10Gi}\n",
            roles="chief: {replicas: 1}\nworker: {replicas: 2, gpus: 1}"))
    output = tmp_path / "output"
    result = run_cli("build", str(jobs), "-o", str(output), "--overlays", str(OVERLAYS))
    assert result.status == 0, result.stderr
    custom = tmp_path / "custom-schema"
    custom.mkdir()
    (custom / "schema.json").write_text(json.dumps(CUSTOM_SCHEMA))
    (custom / "pipeline.yaml").write_text(textwrap.dedent("""\
        apiVersion: example.com/v1alpha1
        kind: Pipeline
        metadata: {name: p}
        spec: {steps: [{name: a, image: one}, {name: b, image: two}]}
        """))
    (custom / "kustomization.yaml").write_text(textwrap.dedent("""\
        resources: [pipeline.yaml]
        openapi: {path: schema.json}
        patches:
        - patch: |-
            apiVersion: example.com/v1alpha1
            kind: Pipeline
            metadata: {name: p}
            spec: {steps: [{name: b, image: three}]}
        """))
    # The same without the schema: Kustomize knows no merge key, and the patch's list replaces.
    builtin = tmp_path / "builtin-schema"
    builtin.mkdir()
    (builtin / "pipeline.yaml").write_text((custom / "pipeline.yaml").read_text())
    (builtin / "kustomization.yaml").write_text(
        (custom / "kustomization.yaml").read_text().replace("openapi: {path: schema.json}\n", ""))
    fifo = tmp_path / "fifo-order"
    fifo.mkdir()
    (fifo / "kustomization.yaml").write_text(
        "resources: [../output/gpu-azure]\nsortOptions: {order: fifo}\nnamePrefix: x-\n")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    examples = sorted(path for path in OUTPUT.iterdir() if path.is_dir())
    assert len(examples) >= 5
    return [output / "gpu-azure", custom, builtin, output / "gpu-azure", output / "smb", fifo,
            broken, custom, output / "smb", builtin, *examples]


def test_the_server_renders_byte_for_byte_as_kustomize_build(
        tmp_path: Path, run_cli: Callable[..., Result], server: Path, kustomize: Path) -> None:
    session = Session(server)
    asked = directories(tmp_path, run_cli)
    answers = [(str(directory), session.ask(str(directory), REPOSITORY)) for directory in asked]
    # A directory named from another working directory, as `kustomize build` run there.
    answers.append(("../output/smb", session.ask("../output/smb", tmp_path / "jobs")))
    assert session.close() == 0
    expected = [kustomize_build(kustomize, str(directory), REPOSITORY) for directory in asked]
    expected.append(kustomize_build(kustomize, "../output/smb", tmp_path / "jobs"))
    assert [answer for _, answer in answers] == expected
    outcomes = [ok for _, (ok, _) in answers]
    assert outcomes.count(False) == 1 and b"missing.yaml" in answers[6][1][1]
    # The custom schema merged the patch's step by name; right after it, without the schema,
    # the patch's list replaced the steps (no schema kept from the directory before).
    assert b"image: three" in answers[1][1][1] and b"image: one" in answers[1][1][1]
    assert b"image: three" in answers[2][1][1] and b"image: one" not in answers[2][1][1]
    assert answers[0][1] == answers[3][1] and answers[1][1] == answers[7][1]
    assert answers[2][1] == answers[9][1]


def test_render_through_the_server_gives_kustomizes_text_and_message(
        tmp_path: Path, server_on_path: Path, kustomize: Path) -> None:
    example = sorted(path for path in OUTPUT.iterdir() if path.is_dir())[0]
    assert render(example) == kustomize_build(kustomize, str(example), Path.cwd())[1].decode()
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(RenderError) as through_server:
        render(tmp_path)
    with pytest.raises(RenderError) as through_command:
        render(tmp_path, Renderer(command=(str(kustomize), "build")))
    assert str(through_server.value) == str(through_command.value).replace(
        "`kustomize build`", "`tfcompile-kustomize`")
    assert "missing.yaml" in str(through_server.value)


def test_a_server_that_stops_leaves_the_rendering_to_the_kustomize_command(
        tmp_path: Path, kustomize: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stopping = tmp_path / "bin"
    stopping.mkdir()
    (stopping / "tfcompile-kustomize").write_text("#!/bin/sh\nread request\nexit 3\n")
    (stopping / "tfcompile-kustomize").chmod(0o755)
    (stopping / "kustomize").symlink_to(kustomize)
    monkeypatch.setenv("PATH", f"{stopping}{os.pathsep}{os.environ['PATH']}")
    example = sorted(path for path in OUTPUT.iterdir() if path.is_dir())[0]
    expected = kustomize_build(kustomize, str(example), Path.cwd())[1].decode()
    assert render(example) == expected
    assert render(example) == expected  # not asked again: the command renders


@pytest.mark.parametrize("workers", [1, 2])
def test_no_server_outlives_the_process_that_started_it(
        tmp_path: Path, server: Path, workers: int) -> None:
    """The server is waited for when its process ends, in the main process and in `validate`'s
    workers: none is left running, and its CPU time is its parent's children's (a benchmark
    counts it). The real server runs under a shell that, once the server has ended (on its own,
    at the end of its input: a server killed after the wait's limit takes the shell with it),
    waits a second and writes that it ended; a process that did not wait for it would be gone
    before that line is written."""
    bin_directory = tmp_path / "bin"
    bin_directory.mkdir()
    started, ended = tmp_path / "started", tmp_path / "ended"
    (bin_directory / "tfcompile-kustomize").write_text(
        f"#!/bin/sh\necho $$ >> {started}\n{server}\nsleep 1\necho $$ >> {ended}\n")
    (bin_directory / "tfcompile-kustomize").chmod(0o755)
    examples = [tmp_path / "first", tmp_path / "second"]
    for example in examples:  # a name prefix: rendered by Kustomize, not read as written
        example.mkdir()
        (example / "kustomization.yaml").write_text("resources: [map.yaml]\nnamePrefix: x-\n")
        (example / "map.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n"
                                          "metadata: {name: settings}\n")
    program = ("import sys\nfrom pathlib import Path\n"
               "from tfcompile.compiler.checking.validation.many_jobs import validate_many\n"
               "outcomes = list(validate_many([Path(name) for name in sys.argv[2:]],"
               " workers=int(sys.argv[1])))\n"
               "assert [(outcome.render_error, outcome.report is not None)"
               " for outcome in outcomes] == [(None, True)] * len(sys.argv[2:]), outcomes\n")
    done = subprocess.run(
        [sys.executable, "-c", program, str(workers), *map(str, examples)],
        env={**os.environ, "PATH": f"{bin_directory}{os.pathsep}{os.environ['PATH']}"},
        cwd=REPOSITORY, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ended.exists(), "the process ended before its server"
    # A worker that found no job left started no server.
    assert sorted(ended.read_text().split()) == sorted(started.read_text().split())


def test_validate_reports_the_same_with_the_server(
        tmp_path: Path, run_cli: Callable[..., Result], server: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = [directory for directory in directories(tmp_path, run_cli)
             if directory.name not in {"broken", "custom-schema"}]

    def reports() -> list[str]:
        return [repr((outcome.render_error, outcome.report and (
            outcome.report.problems, outcome.report.warnings, outcome.report.notes,
            outcome.report.objects))) for outcome in validate_many(asked, workers=2)]

    without = reports()
    # The server through a stand-in that notes each start: one per worker, not one per job.
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    starts = tmp_path / "starts.log"
    (stand_in / "tfcompile-kustomize").write_text(
        f'#!/bin/sh\necho start >> "{starts}"\nexec "{server}" "$@"\n')
    (stand_in / "tfcompile-kustomize").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ['PATH']}")
    assert render_server.find_server() == str(stand_in / "tfcompile-kustomize")
    assert reports() == without
    assert 1 <= len(starts.read_text().splitlines()) <= 2 < len(asked)
