"""User mistakes in job.yaml: each reported at file:line:col with its field, exit status 2,
nothing written, no traceback, and never a secret value echoed back."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Result

BASE = """\
apiVersion: tfcompile.dev/v1alpha1
kind: TrainingJob
metadata:
  name: demo
spec:
  image: tensorflow/tensorflow:2.16.1
  command: [python, /app/train.py]
{spec_extra}  roles:
{roles}
"""

WORKERS = "    worker: {replicas: 2}"


def job(spec_extra: str = "", roles: str = WORKERS) -> str:
    extra = textwrap.indent(textwrap.dedent(spec_extra), "  ") if spec_extra else ""
    return BASE.format(spec_extra=extra, roles=roles)


@dataclass(frozen=True)
class Mistake:
    name: str
    text: str
    at: str  # the text the error must point at (its first occurrence)
    field: str
    says: str
    occurrence: int = 1


MISTAKES = [
    Mistake("unknown spec field", job("replica: 3\n"), "replica:", "spec.replica",
            "unknown field; allowed here: image, command"),
    Mistake("wrong apiVersion", job().replace("tfcompile.dev/v1alpha1", "tfcompile.dev/v1"),
            "tfcompile.dev/v1", "apiVersion", "must be 'tfcompile.dev/v1alpha1'"),
    Mistake("wrong kind", job().replace("kind: TrainingJob", "kind: TFJob"), "TFJob", "kind",
            "must be 'TrainingJob'"),
    Mistake("uppercase job name", job().replace("name: demo", "name: Demo"), "Demo",
            "metadata.name", "must be a DNS-1035 label"),
    Mistake("job name starting with a digit", job().replace("name: demo", "name: 1demo"),
            "1demo", "metadata.name", "starting with a letter"),
    Mistake("missing image", job().replace("  image: tensorflow/tensorflow:2.16.1\n", ""),
            "spec:", "spec.image", "required field is missing"),
    Mistake("negative replicas", job(roles="    worker: {replicas: -1}"), "-1",
            "spec.roles.worker.replicas", "must be at least 0"),
    Mistake("replicas as a string", job(roles='    worker: {replicas: "2"}'), '"2"',
            "spec.roles.worker.replicas", "must be a whole number"),
    Mistake("two chiefs", job(roles="    chief: {replicas: 2}\n    worker: {replicas: 1}"),
            "2}", "spec.roles.chief.replicas", "at most one chief"),
    Mistake("two evaluators",
            job(roles="    worker: {replicas: 2}\n    evaluator: {replicas: 2}"),
            "2}", "spec.roles.evaluator.replicas", "at most one evaluator", occurrence=2),
    Mistake("ps with MultiWorkerMirrored", job(
        "strategy: MultiWorkerMirrored\n", "    worker: {replicas: 2}\n    ps: {replicas: 1}"),
        "ps:", "spec.roles.ps", "MultiWorkerMirrored has no parameter servers"),
    Mistake("ParameterServer without ps", job("strategy: ParameterServer\n"), "roles:",
            "spec.roles", "needs at least one ps replica"),
    Mistake("ParameterServer without workers",
            job(roles="    ps: {replicas: 1}\n    chief: {replicas: 1}"),
            "roles:", "spec.roles", "needs at least one worker replica"),
    Mistake("unknown role", job(roles="    master: {replicas: 1}"), "master:",
            "spec.roles.master", "allowed here: chief, worker, ps, evaluator"),
    Mistake("port out of range", job("port: 70000\n"), "70000", "spec.port",
            "must be at most 65535"),
    Mistake("number as env value", job("env: {EPOCHS: 3}\n"), "3}", "spec.env.EPOCHS",
            "environment values are strings: quote it"),
    Mistake("invalid env name", job('env: {"1BAD NAME": "x"}\n'), '"1BAD NAME"',
            "spec.env.1BAD NAME", "must be an environment variable name"),
    Mistake("env sets TF_CONFIG", job("env: {TF_CONFIG: '{}'}\n"), "TF_CONFIG",
            "spec.env.TF_CONFIG", "set by tfcompile"),
    Mistake("secret value in the spec",
            job("env: {AWS_SECRET_ACCESS_KEY: hunter2-very-secret}\n"),
            "hunter2", "spec.env.AWS_SECRET_ACCESS_KEY", "use {secretKeyRef"),
    Mistake("secretKeyRef without key",
            job("env:\n  PASSWORD: {secretKeyRef: {name: db}}\n"), "secretKeyRef",
            "spec.env.PASSWORD.secretKeyRef.key", "required field is missing"),
    Mistake("envFrom with two sources",
            job("envFrom:\n- {secretRef: {name: a}, configMapRef: {name: b}}\n"),
            "{secretRef", "spec.envFrom[0]", "exactly one of secretRef or configMapRef"),
    Mistake("script file missing", job("script: missing.py\n"), "missing.py", "spec.script",
            "no file 'missing.py' next to job.yaml"),
    Mistake("no command and no script",
            job().replace("  command: [python, /app/train.py]\n", ""),
            "worker:", "spec.roles.worker", "no command"),
    Mistake("shared storage without size",
            job("storage:\n  shared: {mountPath: /mnt/shared}\n"), "shared:",
            "spec.storage.shared", "give size (a new ReadWriteMany claim) or existingClaim"),
    Mistake("existing claim and size",
            job("storage:\n  shared: {mountPath: /data, existingClaim: c, size: 1Gi}\n"),
            "1Gi", "spec.storage.shared.size", "with existingClaim the claim exists already"),
    Mistake("TensorBoard without shared storage", job("tensorboard: {logDir: /logs}\n"),
            "/logs", "spec.tensorboard.logDir", "add storage.shared"),
    Mistake("TensorBoard logDir outside the shared volume", job(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
        "tensorboard: {logDir: /var/logs}\n"), "/var/logs", "spec.tensorboard.logDir",
        "must be inside storage.shared.mountPath (/mnt/shared)"),
    Mistake("overlay that overlays/ lacks", job("overlays: [gpu, nvidia]\n"), "nvidia",
            "spec.overlays[1]", "overlays available there: azure, gpu"),
    Mistake("job name too long for a StatefulSet",
            job(roles="    worker: {replicas: 2}\n    evaluator: {replicas: 1}").replace(
                "name: demo", "name: " + "a" * 45), "a" * 45, "metadata.name",
            "shorten the job name to at most 42 characters"),
    Mistake("TF_CONFIG too large", job(roles="    worker: {replicas: 3000}").replace(
        "name: demo", "name: " + "b" * 40), "roles:", "spec.roles",
        "one environment string holds at most 131072"),
    Mistake("GPU in resources", job(roles=(
        "    worker:\n      replicas: 2\n      resources: {limits: {nvidia.com/gpu: 1}}")),
        "1}}", "spec.roles.worker.resources.limits.nvidia.com/gpu",
        "set GPUs with roles.worker.gpus"),
    Mistake("reserved label", "apiVersion: tfcompile.dev/v1alpha1\nkind: TrainingJob\n"
            "metadata:\n  name: demo\n  labels: {tfcompile.dev/job: other}\n"
            "spec:\n  image: i\n  command: [c]\n  roles:\n    worker: {replicas: 1}\n",
            "tfcompile.dev/job", "metadata.labels.tfcompile.dev/job", "set by tfcompile"),
    Mistake("relative mount path", job("storage:\n  scratch: {mountPath: scratch}\n"),
            "scratch}", "spec.storage.scratch.mountPath", "must be an absolute path"),
    Mistake("memory in the wrong unit", job(roles=(
        "    worker:\n      replicas: 2\n      resources: {requests: {memory: 16GB}}")),
        "16GB", "spec.roles.worker.resources.requests.memory",
        "must be a Kubernetes quantity such as 500m, 4, 1.5 or 16Gi"),
    Mistake("unknown strategy", job("strategy: Mirrored\n"), "Mirrored", "spec.strategy",
            "must be one of 'MultiWorkerMirrored' or 'ParameterServer'"),
    Mistake("unknown TensorBoard service type", job(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
        "tensorboard: {logDir: /mnt/shared/logs, serviceType: Public}\n"), "Public",
        "spec.tensorboard.serviceType", "'ClusterIP', 'NodePort' or 'LoadBalancer'"),
    Mistake("suspend as a string", job('suspend: "yes"\n'), '"yes"', "spec.suspend",
            "must be true or false"),
    Mistake("YAML syntax error", job().replace("  command: [python, /app/train.py]",
                                              "  command: [python, /app/train.py"),
            ":\n    worker:", "(document)", "invalid YAML"),
    Mistake("duplicate key", job("image: other\n"), "image: other", "(document)",
            "invalid YAML"),
    Mistake("document that is a list", "- apiVersion: tfcompile.dev/v1alpha1\n", "- apiVersion",
            "(document)", "expected a mapping with kind: TrainingJob"),
]


def _position(text: str, fragment: str, occurrence: int = 1) -> tuple[int, int]:
    start = -1
    for _ in range(occurrence):
        start = text.index(fragment, start + 1)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return line, column


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_is_reported_at_its_place(
    mistake: Mistake,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    (tmp_path / "job.yaml").write_text(mistake.text, encoding="utf-8")
    overlays = Path(__file__).resolve().parent.parent / "overlays"
    monkeypatch.chdir(tmp_path)
    result = run_cli("build", "job.yaml", "-o", "output", "--overlays", str(overlays))
    line, column = _position(mistake.text, mistake.at, mistake.occurrence)
    expected = f"job.yaml:{line}:{column}: {mistake.field}: "
    assert result.status == 2, result.stderr
    problems = [row for row in result.stderr.splitlines() if row.startswith("job.yaml:")]
    assert any(row.startswith(expected) and mistake.says in row for row in problems), (
        f"expected a line starting {expected!r} containing {mistake.says!r}; got:\n"
        + result.stderr
    )
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "output").exists()


def test_there_are_at_least_25_distinct_mistakes() -> None:
    assert len({m.name for m in MISTAKES}) >= 25


def test_every_problem_of_a_file_is_reported_at_once(
    write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    path = write_job(job("port: 0\nsuspend: 1\n", "    worker: {replicas: -2, gpus: x}"))
    result = run_cli("build", str(path), "-o", str(path.parent / "out"))
    assert result.status == 2
    fields = [row.split(": ")[1] for row in result.stderr.splitlines() if "job.yaml:" in row]
    assert fields == ["spec.port", "spec.roles.worker.replicas", "spec.roles.worker.gpus",
                      "spec.suspend"]
    assert "4 problems found; nothing was written" in result.stderr


def test_problems_of_several_files_are_reported_together(
    tmp_path: Path, write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    first = write_job(job("port: 0\n"), name="a.yaml")
    second = write_job(job().replace("name: demo", "name: other") + "  bogus: 1\n",
                       name="b.yaml")
    result = run_cli("build", str(first), str(second), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "a.yaml:" in result.stderr and "b.yaml:" in result.stderr


def test_secret_values_are_never_echoed(
    write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    path = write_job(job("env:\n  DB_PASSWORD: s3cr3t-value\n  API_TOKEN: 12345\n"))
    result = run_cli("build", str(path), "-o", str(path.parent / "out"))
    assert result.status == 2
    assert "s3cr3t-value" not in result.stderr + result.stdout
    assert "12345" not in result.stderr + result.stdout


def test_two_jobs_with_one_name_are_refused(
    tmp_path: Path, write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    write_job(job(), name="a.yaml")
    write_job(job(), name="b.yaml")
    result = run_cli("build", str(tmp_path / "jobs"), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "job 'demo' is also defined at" in result.stderr


def test_an_alias_bomb_is_refused_quickly(
    write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    layers = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 10):
        previous = f"*a{level - 1}"
        layers.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    text = job().replace("spec:\n", "x-bomb:\n" + textwrap.indent("\n".join(layers), "  ")
                         + "\nspec:\n")
    path = write_job(text)
    import time

    started = time.monotonic()
    result = run_cli("build", str(path), "-o", str(path.parent / "out"))
    elapsed = time.monotonic() - started
    assert result.status == 2
    assert "expands to more than 100000 values through YAML aliases" in result.stderr
    assert elapsed < 5


def test_anchors_and_aliases_work(
    tmp_path: Path, write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    path = write_job(job(roles=(
        "    worker: &role {replicas: 2, resources: {requests: {cpu: '2'}}}\n"
        "    evaluator: {replicas: 1, resources: {requests: {cpu: '2'}}}")))
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr


def test_missing_input_path_is_a_clear_error(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    result = run_cli("build", str(tmp_path / "nowhere.yaml"), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr
