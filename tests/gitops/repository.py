"""A user's GitOps repository, as `tfcompile init` makes it, pushed to the tier's git server.

The deploy files `init` writes are applied as docs/gitops.md says, with only the repository's
URL filled in. Jobs are edited, built with `tfcompile build jobs` and pushed as a user (or
their CI) would; what the cluster then runs is the GitOps controllers' doing alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.local_node import LocalNode, small_requests
from tests.cluster.waiting import wait_for
from tests.conftest import job_text
from tests.gitops.conftest import GitOps

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
NAMESPACE = "ml"  # where the deploy files `init` writes put the jobs
TRAINING_TIMEOUT = 900.0  # real TensorFlow on two shared cores
SYNC_TIMEOUT = 120.0

# A stand-in for a training program where real TensorFlow adds nothing: it says which
# cluster it trains in, then trains for `--seconds` (or fails with `--exit`).
STAND_IN = """\
import argparse, json, os, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=2)
parser.add_argument("--exit", type=int, default=0)
arguments = parser.parse_args()
cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
print("stand-in: training with", len(cluster.get("worker", [])), "workers", flush=True)
time.sleep(arguments.seconds)
sys.exit(arguments.exit)
"""


def run(*command: str, cwd: Path) -> str:
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                               timeout=300)
    assert completed.returncode == 0, (
        f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr}"
        f"{completed.stdout}")
    return completed.stdout


@dataclass
class Repository:
    """A working copy made by `tfcompile init`, whose origin is a bare repository served by
    the tier's git server."""

    directory: Path
    url: str

    def git(self, *arguments: str) -> str:
        return run("git", "-c", "user.name=Trainer", "-c", "user.email=trainer@example.com",
                   *arguments, cwd=self.directory)

    def write_job(self, name: str, text: str, script: str | None = None) -> None:
        directory = self.directory / "jobs" / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "job.yaml").write_text(text)
        if script is not None:
            (directory / "train.py").write_text(script)

    def edit_job(self, name: str, old: str, new: str) -> None:
        path = self.directory / "jobs" / name / "job.yaml"
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new, 1))

    def push(self, message: str) -> float:
        """Build, commit and push; the time of the push (time.monotonic())."""
        run(TFCOMPILE, "build", "jobs", cwd=self.directory)
        self.git("add", "--all")
        self.git("commit", "--quiet", "--message", message)
        self.git("push", "--quiet", "origin", "HEAD:main")
        return time.monotonic()

    def deploy_file(self, path: str) -> Path:
        return self.directory / path


def init_repository(gitops: GitOps, directory: Path, name: str) -> Repository:
    """`tfcompile init`, the repository's URL in the deploy files, a first commit, pushed."""
    run("git", "init", "--quiet", "--bare", "--initial-branch=main",
        str(gitops.git_root / f"{name}.git"), cwd=directory.parent)
    run(TFCOMPILE, "init", str(directory), "--tfcompile-requirement", "tfcompile",
        cwd=directory.parent)
    url = f"{gitops.git_url}/{name}.git"
    for deploy in (directory / "deploy").rglob("*.yaml"):
        deploy.write_text(deploy.read_text().replace("REPOSITORY_URL", url))
    example = directory / "jobs" / "example" / "job.yaml"
    example.write_text(small_requests(example.read_text()))
    repository = Repository(directory, url)
    repository.git("init", "--quiet", "--initial-branch=main")
    repository.git("remote", "add", "origin", url)
    return repository


def stand_in_job(name: str, workers: int, arguments: list[str], extra: str = "") -> str:
    """A job that runs the stand-in with the python of the node (its pods' `python`)."""
    return job_text(name, metadata_lines=f"namespace: {NAMESPACE}", image="python:3.11",
                    script="train.py", command=None,
                    spec_lines=f"args: {json.dumps(arguments)}",
                    roles=f"worker: {{replicas: {workers}}}") + extra


def stateful_set_replicas(node: LocalNode, job: str) -> dict[str, int]:
    items = node.get("statefulsets", "-n", NAMESPACE, "-l", f"tfcompile.dev/job={job}")
    return {item["metadata"]["name"]: item["spec"]["replicas"] for item in items["items"]}


def job_pods(node: LocalNode, job: str) -> dict[str, Any]:
    items = node.get("pods", "-n", NAMESPACE, "-l",
                     f"tfcompile.dev/job={job},tfcompile.dev/role")["items"]
    return {pod["metadata"]["name"]: pod for pod in items}


def state_records(node: LocalNode, job: str) -> dict[str, str]:
    found = node.kubectl("get", "configmap", f"{job}-state", "-n", NAMESPACE, "-o", "json",
                         check=False)
    return dict(json.loads(found).get("data") or {}) if found else {}


def released(node: LocalNode, job: str) -> bool:
    replicas = stateful_set_replicas(node, job)
    return bool(replicas) and set(replicas.values()) == {0} and not job_pods(node, job)


def job_objects(node: LocalNode, job: str) -> list[str]:
    """Every object of the job that a prune must delete (kind/name)."""
    kinds = ("statefulsets,services,configmaps,persistentvolumeclaims,serviceaccounts,roles,"
             "rolebindings,networkpolicies,deployments,pods")
    return node.kubectl("get", kinds, "-n", NAMESPACE, "-l", f"tfcompile.dev/job={job}",
                        "-o", "name").split()


def compiled_revision(repository: Repository, job: str) -> str:
    text = (repository.directory / "output" / job / f"configmap-{job}-state.yaml").read_text()
    for line in text.splitlines():
        if line.strip().startswith("tfcompile.dev/revision:"):
            return line.split(":", 1)[1].strip().strip("'")
    raise AssertionError(f"no revision in the state ConfigMap of {job}")


def wait_released(node: LocalNode, job: str, timeout: float = TRAINING_TIMEOUT) -> None:
    wait_for(f"{job} to release itself", lambda: released(node, job), timeout,
             lambda: node.log()[-4000:])


def pods_on_revision(node: LocalNode, job: str, revision: str, count: int) -> bool:
    pods = job_pods(node, job)
    return len(pods) == count and all(
        pod["metadata"]["annotations"].get("tfcompile.dev/revision") == revision
        and pod["status"].get("phase") == "Running" for pod in pods.values())


def every_task_trained_on(node: LocalNode, job: str, revision: str, workers: int) -> bool:
    """Every worker's launcher opened the revision gate for `revision`, and every training
    that started after that saw `workers` workers (no mixing of old and new TF_CONFIGs)."""
    opened = f"tfcompile: every task runs revision {revision}; training"
    for index in range(workers):
        lines = node.pod_lines(NAMESPACE, f"{job}-worker-{index}")
        if opened not in lines:
            return False
        after = lines[lines.index(opened):]
        starts = [line for line in after if line.startswith("stand-in: training with")]
        if not starts or any(line != f"stand-in: training with {workers} workers"
                             for line in starts):
            return False
    return True
