"""User mistakes in job.yaml: each reported at file:line:col with its field, exit status 2,
nothing written, no traceback, and never a secret value echoed back."""

from __future__ import annotations

import base64
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TWO_WORKERS, Result, job_text


def job(spec_extra: str = "", roles: str = TWO_WORKERS) -> str:
    return job_text(spec_lines=spec_extra, roles=roles)


def _pod_spec(lines: str) -> str:
    """The job with `lines` in the worker role's pod template spec."""
    return job(roles="    worker:\n      replicas: 2\n      podTemplate:\n        spec:\n"
               + textwrap.indent(lines, "          "))


ANTI_AFFINITY = """\
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector: {{matchLabels: {labels}}}
"""


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
    Mistake("unknown role", job(roles="    leader: {replicas: 1}"), "leader:",
            "spec.roles.leader", "allowed here: chief, worker, ps, evaluator"),
    Mistake("port out of range", job("port: 70000\n"), "70000", "spec.port",
            "must be at most 65535"),
    Mistake("unknown compatibility name", job("compatibility: [tf-spawner, horovod]\n"),
            "horovod", "spec.compatibility[1]",
            "must be one of 'tf-spawner', 'elasticdl' or 'tf1-flags'"),
    Mistake("the revision gate's port as the training port", job("port: 2223\n"), "2223",
            "spec.port", "port 2223 is where every task answers its revision"),
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
            "no such file (the path is relative to the job file's folder)"),
    Mistake("no command and no script",
            job().replace("  command: [python, /app/train.py]\n", ""),
            "spec:", "spec", "the job has neither command nor script: set spec.command"),
    Mistake("a role without a command in a job without one",
            job(roles="    chief: {replicas: 1, command: [python, c.py]}\n"
                "    worker: {replicas: 2}").replace("  command: [python, /app/train.py]\n", ""),
            "worker:", "spec.roles.worker", "this role has no command of its own"),
    Mistake("shared storage without size",
            job("storage:\n  shared: {mountPath: /mnt/shared}\n"), "shared:",
            "spec.storage.shared", "give size (a new ReadWriteMany claim) or existingClaim"),
    Mistake("existing claim and size",
            job("storage:\n  shared: {mountPath: /data, existingClaim: c, size: 1Gi}\n"),
            "1Gi", "spec.storage.shared.size", "with existingClaim the claim exists already"),
    Mistake("existing claim and whenDeleted",
            job("storage:\n  shared: {mountPath: /data, existingClaim: c, whenDeleted: Delete}\n"),
            "Delete}", "spec.storage.shared.whenDeleted",
            "with existingClaim the claim exists already"),
    Mistake("whenDeleted misspelt",
            job("storage:\n  shared: {mountPath: /data, size: 1Gi, whenDeleted: delete}\n"),
            "delete", "spec.storage.shared.whenDeleted", "'Retain' or 'Delete'"),
    Mistake("TensorBoard without shared storage", job("tensorboard: {logDir: /logs}\n"),
            "/logs", "spec.tensorboard.logDir", "add storage.shared"),
    Mistake("TensorBoard logDir outside the shared volume", job(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
        "tensorboard: {logDir: /var/logs}\n"), "/var/logs", "spec.tensorboard.logDir",
        "must be inside storage.shared.mountPath"),
    Mistake("overlay that overlays/ lacks", job("overlays: [gpu, nvidia]\n"), "nvidia",
            "spec.overlays[1]", "overlays available there: azure, azure-smb, gpu"),
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
            "invalid YAML: a key appears twice in one mapping"),
    Mistake("document that is a list", "- apiVersion: tfcompile.dev/v1alpha1\n", "- apiVersion",
            "(document)", "expected a mapping with kind: TrainingJob"),
    *(Mistake(f"deadline {value}", job(f"deadline: {value}\n"), value, "spec.deadline",
              "must be a duration in hours, minutes and seconds, in that order, such as 48h")
      for value in ["2d", "48s0", "30m1h", "1.5h", "48H", "-1h", "hm5"]),
    Mistake("deadline as a number", job("deadline: 3600\n"), "3600", "spec.deadline",
            "must be a string"),
    Mistake("deadline of no time", job("deadline: 0h\n"), "0h", "spec.deadline",
            "0h is 0 s; give at least 1s and at most 8784h"),
    Mistake("deadline past a year", job("deadline: 9000h\n"), "9000h", "spec.deadline",
            "9000h is 32400000 s; give at least 1s and at most 8784h"),
    Mistake("unknown onFailure", job("onFailure: delete\n"), "delete", "spec.onFailure",
            "'idle' or 'release'"),
    # Selectors written against a Kubeflow TFJob's pod labels, which tfcompile's pods lack.
    Mistake("TFJob's replica-type in a pod anti-affinity", _pod_spec(ANTI_AFFINITY.format(
        labels="{training.kubeflow.org/replica-type: worker}")), "training.kubeflow.org",
        "spec.roles.worker.podTemplate.spec.affinity.podAntiAffinity."
        "preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector."
        "matchLabels.training.kubeflow.org/replica-type",
        "selects pods by training.kubeflow.org/replica-type, a label only Kubeflow's training "
        "operator puts on TFJob pods; tfcompile's pods do not carry it, so this selects none "
        "of the job's pods: use tfcompile.dev/role (chief, worker, ps or evaluator"),
    Mistake("TFJob's job-name in a topology spread constraint", _pod_spec(
        "topologySpreadConstraints:\n- {maxSkew: 1, topologyKey: kubernetes.io/hostname, "
        "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchExpressions: [{key: "
        "training.kubeflow.org/job-name, operator: In, values: [demo]}]}}\n"),
        "training.kubeflow.org", "spec.roles.worker.podTemplate.spec."
        "topologySpreadConstraints[0].labelSelector.matchExpressions[0].key",
        "selects none of the job's pods: use tfcompile.dev/job (the job's name)"),
    Mistake("TFJob's replica-index in matchLabelKeys", _pod_spec(
        "topologySpreadConstraints:\n- {maxSkew: 1, topologyKey: kubernetes.io/hostname, "
        "whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {tfcompile.dev/job: "
        "demo}}, matchLabelKeys: [training.kubeflow.org/replica-index]}\n"),
        "training.kubeflow.org", "spec.roles.worker.podTemplate.spec."
        "topologySpreadConstraints[0].matchLabelKeys[0]",
        "use apps.kubernetes.io/pod-index (a pod's index in its role, with tfcompile.dev/role)"),
    Mistake("TFJob's replica-type as a node selector", job(
        "podTemplate:\n  spec:\n    nodeSelector: {training.kubeflow.org/replica-type: ps}\n"),
        "training.kubeflow.org", "spec.podTemplate.spec.nodeSelector."
        "training.kubeflow.org/replica-type", "selects nodes by training.kubeflow.org/"
        "replica-type, a pod label only Kubeflow's training operator puts on TFJob pods; no "
        "node carries it, so a required selector leaves the pods Pending"),
    Mistake("TFJob's job-role in TensorBoard's pod affinity", job(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
        "tensorboard:\n  logDir: /mnt/shared/logs\n  podTemplate:\n    spec:\n"
        "      affinity:\n        podAffinity:\n"
        "          requiredDuringSchedulingIgnoredDuringExecution:\n"
        "          - topologyKey: kubernetes.io/hostname\n"
        "            labelSelector: {matchLabels: {training.kubeflow.org/job-role: master}}\n"),
        "training.kubeflow.org", "spec.tensorboard.podTemplate.spec.affinity.podAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels."
        "training.kubeflow.org/job-role", "use tfcompile.dev/role: chief"),
]


def _role(lines: str) -> str:
    """The job with the worker role given as `lines` (at the role's indentation)."""
    return job(roles="    worker:\n      replicas: 2\n" + textwrap.indent(lines, "      "))


RUN_POLICY = "tfcompile has no runPolicy: suspend is spec.suspend"
RESTART_POLICY = ("tfcompile has no restartPolicy: the pods of a StatefulSet always restart, and "
                  "spec.failurePolicy says when a failing task stops")
CLEAN_POD_POLICY = ("tfcompile has no cleanPodPolicy: a job that has ended keeps its pods, "
                    "idling, with their logs (the default, onSuccess: idle and onFailure: idle); "
                    "spec.onSuccess: release scales the job's StatefulSets to zero once it has "
                    "succeeded, and spec.onFailure: release once it has given up (both together "
                    "are TFJob's All")
TTL = ("tfcompile has no ttlSecondsAfterFinished: the job's objects live as long as the job is "
       "in git")
DEADLINE = ("use spec.deadline, a duration such as 1h or 48h (activeDeadlineSeconds: 3600 is "
            "deadline: 1h)")
BACKOFF_LIMIT = "use spec.failurePolicy.maxRestarts"
SCHEDULING_POLICY = "use spec.scheduling: gang (volcano, coscheduling or kueue)"

TFJOB_MISTAKES = [
    Mistake("TFJob apiVersion", job().replace("tfcompile.dev/v1alpha1", "kubeflow.org/v1"),
            "kubeflow.org/v1", "apiVersion", "must be 'tfcompile.dev/v1alpha1': this is a "
            "Kubeflow TFJob's apiVersion (docs/migrating-from-tfjob.md"),
    Mistake("TFJob kind", job().replace("kind: TrainingJob", "kind: TFJob"), "TFJob", "kind",
            "must be 'TrainingJob': this is a Kubeflow TFJob's kind"),
    Mistake("tfReplicaSpecs", job("tfReplicaSpecs:\n  Worker: {replicas: 2}\n"),
            "tfReplicaSpecs:", "spec.tfReplicaSpecs",
            "TFJob's tfReplicaSpecs are spec.roles: Chief and Master become chief"),
    Mistake("an empty runPolicy", job("runPolicy: {}\n"), "runPolicy:", "spec.runPolicy",
            RUN_POLICY),
    Mistake("runPolicy.cleanPodPolicy", job("runPolicy: {cleanPodPolicy: All}\n"),
            "cleanPodPolicy", "spec.runPolicy.cleanPodPolicy", CLEAN_POD_POLICY),
    Mistake("runPolicy.ttlSecondsAfterFinished",
            job("runPolicy:\n  ttlSecondsAfterFinished: 600\n"), "ttlSeconds",
            "spec.runPolicy.ttlSecondsAfterFinished", TTL),
    Mistake("runPolicy.activeDeadlineSeconds",
            job("runPolicy:\n  activeDeadlineSeconds: 3600\n"), "activeDeadline",
            "spec.runPolicy.activeDeadlineSeconds", DEADLINE),
    Mistake("runPolicy.backoffLimit", job("runPolicy: {backoffLimit: 3}\n"), "backoffLimit",
            "spec.runPolicy.backoffLimit", BACKOFF_LIMIT),
    Mistake("runPolicy.schedulingPolicy", job(
        "runPolicy:\n  schedulingPolicy: {minAvailable: 3, queue: research}\n"),
        "schedulingPolicy", "spec.runPolicy.schedulingPolicy", SCHEDULING_POLICY),
    Mistake("runPolicy.suspend", job("runPolicy: {suspend: true}\n"), "suspend",
            "spec.runPolicy.suspend", "use spec.suspend"),
    Mistake("runPolicy.managedBy", job("runPolicy: {managedBy: kueue.x-k8s.io/multikueue}\n"),
            "managedBy", "spec.runPolicy.managedBy", "tfcompile has no managedBy"),
    Mistake("a field runPolicy never had", job("runPolicy: {backoffLimit: 3, retries: 2}\n"),
            "retries", "spec.runPolicy.retries", f"not a field of TFJob's either; {RUN_POLICY}"),
    Mistake("successPolicy", job("successPolicy: AllWorkers\n"), "successPolicy",
            "spec.successPolicy", "without a chief, when every worker has (TFJob's AllWorkers)"),
    Mistake("enableDynamicWorker", job("enableDynamicWorker: true\n"), "enableDynamicWorker",
            "spec.enableDynamicWorker", "tfcompile has no dynamic workers: change "
            "roles.worker.replicas in git"),
    Mistake("cleanPodPolicy under spec", job("cleanPodPolicy: Running\n"), "cleanPodPolicy",
            "spec.cleanPodPolicy", CLEAN_POD_POLICY),
    Mistake("ttlSecondsAfterFinished under spec", job("ttlSecondsAfterFinished: 600\n"),
            "ttlSeconds", "spec.ttlSecondsAfterFinished", TTL + " (remove it, and Argo CD or "
            "Flux prunes them); spec.onSuccess: release frees the pods once it has succeeded, "
            "and spec.onFailure: release once it has given up"),
    Mistake("activeDeadlineSeconds under spec", job("activeDeadlineSeconds: 3600\n"),
            "activeDeadline", "spec.activeDeadlineSeconds",
            DEADLINE + ": a revision that trains longer is stopped and recorded as failed"),
    Mistake("backoffLimit under spec", job("backoffLimit: 3\n"), "backoffLimit",
            "spec.backoffLimit", BACKOFF_LIMIT),
    Mistake("schedulingPolicy under spec", job("schedulingPolicy: {queue: research}\n"),
            "schedulingPolicy", "spec.schedulingPolicy", SCHEDULING_POLICY),
    Mistake("managedBy under spec", job("managedBy: kueue.x-k8s.io/multikueue\n"),
            "managedBy", "spec.managedBy", "tfcompile has no managedBy: its output is "
            "StatefulSets and Services, which Kubernetes' own controllers manage"),
    Mistake("restartPolicy under spec", job("restartPolicy: OnFailure\n"), "restartPolicy",
            "spec.restartPolicy", RESTART_POLICY),
    Mistake("gpus for the whole job", job("gpus: 1\n"), "gpus", "spec.gpus",
            "gpus is a role's: roles.<role>.gpus (for example roles.worker.gpus)"),
    Mistake("nodeSelector for the whole job", job("nodeSelector: {pool: gpu}\n"),
            "nodeSelector", "spec.nodeSelector",
            "a pod's field: put it in spec.podTemplate.spec.nodeSelector"),
    Mistake("nodeSelector under a role", _role("nodeSelector: {pool: gpu}\n"), "nodeSelector",
            "spec.roles.worker.nodeSelector",
            "a pod's field: put it in roles.worker.podTemplate.spec.nodeSelector"),
    Mistake("tolerations under a role", _role("tolerations: []\n"), "tolerations",
            "spec.roles.worker.tolerations",
            "a pod's field: put it in roles.worker.podTemplate.spec.tolerations"),
    Mistake("volumeMounts under a role", _role("volumeMounts: []\n"), "volumeMounts",
            "spec.roles.worker.volumeMounts", "a container's field: put it in "
            "roles.worker.podTemplate.spec.containers, in the container named tensorflow"),
    Mistake("schedulerName under a role", _role("schedulerName: volcano\n"), "schedulerName",
            "spec.roles.worker.schedulerName", "a pod template may not set schedulerName: set "
            "spec.scheduling (gang: volcano | coscheduling | kueue)"),
    *(Mistake(f"restartPolicy {value} under a role", _role(f"restartPolicy: {value}\n"),
              "restartPolicy", "spec.roles.worker.restartPolicy", f"{RESTART_POLICY}: {says}")
      for value, says in [
          ("OnFailure", "TFJob's Never is {maxRestarts: 0}, ExitCode is doNotRetryExitCodes with "
           "the codes retrying will not fix (TFJob took 1-127), OnFailure and Always are the "
           "default (no failurePolicy: retried for ever) or a maxRestarts"),
          ("ExitCode", "TFJob's Never is {maxRestarts: 0}, ExitCode is doNotRetryExitCodes"),
          ("Never", "TFJob's Never is {maxRestarts: 0}"),
          ("Always", "TFJob's Never is {maxRestarts: 0}")]),
    Mistake("failurePolicy under a role", _role("failurePolicy: {maxRestarts: 3}\n"),
            "failurePolicy", "spec.roles.worker.failurePolicy",
            "failurePolicy is the job's, for every role: spec.failurePolicy"),
    Mistake("backoffLimit under a role", _role("backoffLimit: 3\n"), "backoffLimit",
            "spec.roles.worker.backoffLimit", BACKOFF_LIMIT),
    Mistake("template under a role", _role("template:\n  spec: {containers: []}\n"),
            "template", "spec.roles.worker.template", "TFJob's template is "
            "roles.worker.podTemplate here; its tensorflow container's image, command, args, env "
            "and resources go in roles.worker's own fields"),
    Mistake("a master role", job(roles="    master: {replicas: 1}\n    worker: {replicas: 1}"),
            "master:", "spec.roles.master", "TFJob's Master is TensorFlow's chief: use "
            "roles.chief"),
    *(Mistake(f"a {kind} role", job(roles=f"    {kind}: {{replicas: 1}}"), f"{kind}:",
              f"spec.roles.{kind}", advice)
      for kind, advice in [
          ("Master", "TFJob's Master is TensorFlow's chief: use roles.chief"),
          ("Chief", "roles are written in lower case: use roles.chief"),
          ("Worker", "roles are written in lower case: use roles.worker"),
          ("PS", "roles are written in lower case: use roles.ps"),
          ("Evaluator", "roles are written in lower case: use roles.evaluator")]),
    *(Mistake(f"schedulingPolicy.{field} under scheduling",
              job(f"scheduling: {{gang: volcano, {field}: 1}}\n"), field,
              f"spec.scheduling.{field}", advice)
      for field, advice in [
          ("minAvailable", "tfcompile has no minAvailable: a gang is always every pod of the "
           "job"),
          ("priorityClass", "use podTemplate.spec.priorityClassName"),
          ("minResources", "tfcompile has no minResources"),
          ("scheduleTimeoutSeconds", "tfcompile has no scheduleTimeoutSeconds")]),
    Mistake("a pod's field straight under podTemplate", job("podTemplate:\n  nodeSelector: "
            "{pool: gpu}\n"), "nodeSelector", "spec.podTemplate.nodeSelector",
            "unknown field (Kubernetes 1.33 schema); a pod's field belongs under spec: "
            "spec.podTemplate.spec.nodeSelector"),
    Mistake("an image's entrypoint instead of a command",
            job().replace("  command: [python, /app/train.py]\n", ""), "spec:", "spec",
            "the job has neither command nor script: set spec.command (or spec.script, a file "
            "to run with python); tfcompile's launcher runs the command, so the image's own "
            "entrypoint does not run"),
]
"""A Kubeflow TFJob's fields where a user moving a job writes them: each names the field to use
instead, or says that tfcompile has none and why."""


def _position(text: str, fragment: str, occurrence: int = 1) -> tuple[int, int]:
    start = -1
    for _ in range(occurrence):
        start = text.index(fragment, start + 1)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return line, column


def _refused_at(run_cli: Callable[..., Result], text: str, place: str, field: str, says: str,
                *options: str, occurrence: int = 1) -> Result:
    """Build `text` as job.yaml in the working directory: it is refused, nothing is written,
    and a line starts with the file, line and column of `place` (its `occurrence`-th match in
    `text`) and `field`, and contains `says`."""
    Path("job.yaml").write_text(text, encoding="utf-8")
    result = run_cli("build", "job.yaml", "-o", "output", *options)
    line, column = _position(text, place, occurrence)
    expected = f"job.yaml:{line}:{column}: {field}"
    assert result.status == 2, result.stderr
    assert any(row.startswith(expected) and says in row for row in result.stderr.splitlines()), (
        f"expected a line starting {expected!r} containing {says!r}; got:\n" + result.stderr)
    assert not Path("output").exists()
    return result


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_is_reported_at_its_place(
    mistake: Mistake,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    overlays = Path(__file__).resolve().parent.parent / "overlays"
    monkeypatch.chdir(tmp_path)
    result = _refused_at(run_cli, mistake.text, mistake.at, f"{mistake.field}: ", mistake.says,
                         "--overlays", str(overlays), occurrence=mistake.occurrence)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mistake", TFJOB_MISTAKES, ids=[m.name for m in TFJOB_MISTAKES])
def test_each_tfjob_field_says_what_to_use_instead(
    mistake: Mistake,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _refused_at(run_cli, mistake.text, mistake.at, f"{mistake.field}: ", mistake.says,
                         occurrence=mistake.occurrence)
    assert "Traceback" not in result.stderr


def test_every_tfjob_field_of_the_table_is_tried() -> None:
    """Each place of the table of TFJob fields is one of the mistakes above (a role's place
    tried with the worker)."""
    from tfcompile.spec.misplaced_fields import ROLE, TFJOB_FIELDS

    tried = {m.field for m in TFJOB_MISTAKES}
    untried = [".".join(hint.place) for hint in TFJOB_FIELDS
               if ".".join(hint.place).replace(ROLE, "worker") not in tried]
    assert untried == []


def test_there_are_at_least_25_distinct_mistakes() -> None:
    assert len({m.name for m in MISTAKES}) >= 25


@dataclass(frozen=True)
class Typo:
    """A misspelt field name or value: refused at `at`, naming `field`, with "did you mean
    `suggests`?" (None: no suggestion at all); the value written (`typed`) is never shown."""

    name: str
    text: str
    at: str
    field: str
    suggests: str | None
    typed: str | None = None


def _volume(lines: str) -> str:
    return job("storage:\n  volumes:\n  - {name: data, claimName: data, mountPath: /data, "
               + lines + "}\n")


def _tensorboard(lines: str) -> str:
    return job("storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
               "tensorboard: {logDir: /mnt/shared/logs, " + lines + "}\n")


TYPOS = [
    Typo("a top-level field", job().replace("metadata:", "metdata:"), "metdata:", "metdata",
         "metadata"),
    Typo("a metadata field", job().replace("  name: demo\n", "  name: demo\n  namespce: ml\n"),
         "namespce", "metadata.namespce", "namespace"),
    Typo("onSuccess misspelt", job("onSucess: release\n"), "onSucess", "spec.onSucess",
         "onSuccess"),
    Typo("a field in snake_case", job("not_secret: [PAD_TOKEN]\n"), "not_secret",
         "spec.not_secret", "notSecret"),
    Typo("a role's field with a capital", job(roles="    worker: {Replicas: 2}"), "Replicas",
         "spec.roles.worker.Replicas", "replicas"),
    Typo("a role misspelt", job(roles="    wroker: {replicas: 2}"), "wroker:",
         "spec.roles.wroker", "worker"),
    Typo("mount_path in shared storage", job("storage:\n  shared: {mount_path: /mnt, "
         "size: 1Gi}\n"), "mount_path", "spec.storage.shared.mount_path", "mountPath"),
    Typo("a field of a list item", _volume("readonly: true"), "readonly",
         "spec.storage.volumes[0].readonly", "readOnly"),
    Typo("a field of an env reference", job("env:\n  DB: {secretKeyRf: {name: db, key: k}}\n"),
         "secretKeyRf", "spec.env.DB.secretKeyRf", "secretKeyRef"),
    Typo("a failurePolicy field", job("failurePolicy: {maxRestart: 3}\n"), "maxRestart",
         "spec.failurePolicy.maxRestart", "maxRestarts"),
    Typo("a scheduling field", job("scheduling: {gang: volcano, queu: research}\n"), "queu",
         "spec.scheduling.queu", "queue"),
    Typo("a TensorBoard field", _tensorboard("service_type: NodePort"), "service_type",
         "spec.tensorboard.service_type", "serviceType"),
    Typo("a mount of a pod template", job("podTemplate:\n  spec:\n    containers:\n"
         "    - name: tensorflow\n      volumeMounts: [{name: data, mountpath: /data}]\n"),
         "mountpath", "spec.podTemplate.spec.containers[0].volumeMounts[0].mountpath",
         "mountPath"),
    Typo("onSuccess: relase", job("onSuccess: relase\n"), "relase", "spec.onSuccess",
         "release", "relase"),
    Typo("onFailure: Release", job("onFailure: Release\n"), "Release", "spec.onFailure",
         "release", "Release"),
    Typo("onSuccess: idel", job("onSuccess: idel\n"), "idel", "spec.onSuccess", "idle",
         "idel"),
    Typo("launcher: pyhton", job("launcher: pyhton\n"), "pyhton", "spec.launcher", "python",
         "pyhton"),
    Typo("compatibility: tf_spawner", job("compatibility: [elasticdl, tf_spawner]\n"),
         "tf_spawner", "spec.compatibility[1]", "tf-spawner", "tf_spawner"),
    Typo("whenDeleted: delete", job("storage:\n  shared: {mountPath: /mnt, size: 1Gi, "
         "whenDeleted: delete}\n"), "delete}", "spec.storage.shared.whenDeleted", "Delete",
         "delete}"),
    Typo("gang: kueeu", job("scheduling: {gang: kueeu, queue: research}\n"), "kueeu",
         "spec.scheduling.gang", "kueue", "kueeu"),
    Typo("serviceType: clusterip", _tensorboard("serviceType: clusterip"), "clusterip",
         "spec.tensorboard.serviceType", "ClusterIP", "clusterip"),
    Typo("strategy: parameterserver", job("strategy: parameterserver\n",
         "    worker: {replicas: 2}\n    ps: {replicas: 1}"), "parameterserver",
         "spec.strategy", "ParameterServer", "parameterserver"),
    Typo("a role of a volume", _volume("readOnly: true, roles: [chief, wroker]"), "wroker",
         "spec.storage.volumes[0].roles[1]", "worker", "wroker"),
    Typo("goal: maximise", job("sweep:\n  parameters: {RATE: ['0.1']}\n"
         "  objective: {metric: loss, goal: maximise}\n"), "maximise",
         "spec.sweep.objective.goal", "maximize", "maximise"),
    Typo("kind: TrainingJobs", job().replace("kind: TrainingJob", "kind: TrainingJobs"),
         "TrainingJobs", "kind", "TrainingJob", "TrainingJobs"),
    Typo("an overlay misspelt", job("overlays: [gpus]\n"), "gpus", "spec.overlays[0]", "gpu"),
    Typo("a field like none allowed", job("replica: 3\n"), "replica:", "spec.replica", None),
    Typo("a role like none", job(roles="    leader: {replicas: 1}"), "leader:",
         "spec.roles.leader", None),
    Typo("a value like none", job("onSuccess: delete\n"), "delete", "spec.onSuccess", None,
         "delete"),
    Typo("a gang like none", job("scheduling: {gang: slurm}\n"), "slurm",
         "spec.scheduling.gang", None, "slurm"),
    Typo("a compatibility like none", job("compatibility: [horovod]\n"), "horovod",
         "spec.compatibility[0]", None, "horovod"),
    Typo("a short role like none", job(roles="    worker: {replicas: 1}\n    px: {replicas: 1}"),
         "px:", "spec.roles.px", None),
]
"""Misspelt field names at every level the models define (and in a pod template, by
Kubernetes' schema), misspelt values of every enum, and misspellings close to nothing."""


@pytest.mark.parametrize("typo", TYPOS, ids=[typo.name for typo in TYPOS])
def test_a_misspelling_says_what_was_meant_when_one_is_clearly_closest(
    typo: Typo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    overlays = Path(__file__).resolve().parent.parent / "overlays"
    monkeypatch.chdir(tmp_path)
    says = f"; did you mean '{typo.suggests}'?" if typo.suggests else ""
    result = _refused_at(run_cli, typo.text, typo.at, f"{typo.field}: ", says,
                         "--overlays", str(overlays))
    row = next(row for row in result.stderr.splitlines() if f" {typo.field}: " in row)
    assert row.count("did you mean") == (1 if typo.suggests else 0), row
    if typo.typed is not None:
        assert typo.typed not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_a_required_field_a_misspelling_stands_for_is_not_also_missing(
    write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    """`mount_path` is reported once, as a misspelling of mountPath, not also as mountPath
    missing; a required field nothing stands for is still missing."""
    path = write_job(job("storage:\n  shared: {mount_path: /mnt, size: 1Gi}\n"
                         "  volumes:\n  - {name: data, claimName: data, mountPth: /data, "
                         "readOnly: true}\n").replace("metadata:", "metdata:"))
    result = run_cli("build", str(path), "-o", str(path.parent / "out"))
    fields = sorted(row.split(": ")[1] for row in result.stderr.splitlines()
                    if "job.yaml:" in row)
    assert fields == ["metdata", "spec.storage.shared.mount_path",
                      "spec.storage.volumes[0].mountPth"]
    path.write_text(job("storage:\n  shared: {mountpoint: /mnt, size: 1Gi}\n"),
                    encoding="utf-8")
    result = run_cli("build", str(path), "-o", str(path.parent / "out"))
    assert "spec.storage.shared.mountPath: required field is missing" in result.stderr
    assert "spec.storage.shared.mountpoint: unknown field; allowed here: mountPath" in \
        result.stderr
    assert "did you mean" not in result.stderr


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
    started = time.process_time()  # the work done, whatever else shares the processor
    result = run_cli("build", str(path), "-o", str(path.parent / "out"))
    elapsed = time.process_time() - started
    assert result.status == 2
    assert ("holds more than 10000 values or 262144 characters of text (keys included) once "
            "its YAML aliases are expanded") in result.stderr
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


# Literal credentials: each detector, in each place it may hide; the message names the place and
# never the value. The values are assembled here so that no scanner mistakes this file for a leak.
AWS_KEY_ID = "AKIA" + "IOSFODNN7" + "EXAMPLE"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
GITHUB_FINE_GRAINED = "github_pat_" + "11ABCDEFG0" * 3
GITLAB_TOKEN = "glpat-" + "x1Y2z3W4v5" * 2
SLACK_TOKEN = "xoxb-" + "123456789012-" + "abcdefghijKLMN"
GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
HUGGING_FACE = "hf_" + "AbCdEfGhIj" * 3 + "KlMn"
OPENAI_STYLE = "sk-proj-" + "Ab1Cd2Ef3G" * 4
PRIVATE_KEY = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N"
AZURE = "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + "Zm9vYmFy" * 4 + "=="
PASSWORD = "pa55-w0rd-" + "Zebra"
DATABASE_URL = "postgres://trainer:" + PASSWORD + "@db.internal:5432/runs"
AZURE_ACCOUNT_KEY = base64.b64encode(bytes(range(7, 71))).decode()  # 88 characters, 64 bytes
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY8n2Qe5Lz1A"  # 40 random-looking characters
PLAIN_AWS_SECRET = "Ab1" * 13 + "A"  # 40 characters, too regular to be taken alone
GOOGLE_PRIVATE_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "BKcwggSjAgEAAoIBAQC7"
GOOGLE_SERVICE_ACCOUNT = ('{"type": "service_' + 'account", "project_id": "p", '
                          '"private_key": "' + GOOGLE_PRIVATE_KEY + '"}')
GITHUB_APP_TOKEN = "ghs_" + "Q9w8E7r6T5" * 3 + "y4U3i2"
SLACK_APP_TOKEN = "xapp-" + "1-A0123456789-" + "4567890123456-abcdef0123456789"


@dataclass(frozen=True)
class Secret:
    name: str
    text: str
    at: str  # where the problem points (first occurrence)
    field: str
    says: str
    value: str  # must never be printed


def _with_metadata(lines: str) -> str:
    return job().replace("  name: demo\n", "  name: demo\n" + textwrap.indent(lines, "  "))


SHAPED = "holds what looks like"
NAMED = "its value is written here"
OPTION = "whose name says it is a secret"

SECRETS = [
    Secret("AWS access key id in env", job(f"env: {{AWS_ACCESS_KEY_ID: {AWS_KEY_ID}}}\n"),
           AWS_KEY_ID, "spec.env.AWS_ACCESS_KEY_ID", f"{SHAPED} an AWS access key id",
           AWS_KEY_ID),
    Secret("GitHub token in a role's env", job(roles=(
        f"    worker: {{replicas: 2, env: {{HUB: {GITHUB_TOKEN}}}}}")), GITHUB_TOKEN,
        "spec.roles.worker.env.HUB", f"{SHAPED} a GitHub token", GITHUB_TOKEN),
    Secret("fine-grained GitHub token in args", job(f"args: [--hub, {GITHUB_FINE_GRAINED}]\n"),
           GITHUB_FINE_GRAINED, "spec.args[1]", f"{SHAPED} a GitHub token",
           GITHUB_FINE_GRAINED),
    Secret("GitLab token in command", job().replace(
        "command: [python, /app/train.py]", f"command: [python, /app/train.py, {GITLAB_TOKEN}]"),
        GITLAB_TOKEN, "spec.command[2]", f"{SHAPED} a GitLab token", GITLAB_TOKEN),
    Secret("Slack token in an annotation",
           _with_metadata(f"annotations: {{hook: {SLACK_TOKEN}}}\n"), SLACK_TOKEN,
           "metadata.annotations.hook", f"{SHAPED} a Slack token", SLACK_TOKEN),
    Secret("Google API key in a role's args", job(roles=(
        f"    worker: {{replicas: 2, args: ['--key={GOOGLE_KEY}']}}")), "'--key",
        "spec.roles.worker.args[0]", f"{SHAPED} a Google API key", GOOGLE_KEY),
    Secret("Hugging Face token in env", job(f"env: {{HF_HOME_HINT: {HUGGING_FACE}}}\n"),
           HUGGING_FACE, "spec.env.HF_HOME_HINT", f"{SHAPED} a Hugging Face token",
           HUGGING_FACE),
    Secret("sk- API key in env", job(f"env: {{LLM: {OPENAI_STYLE}}}\n"), OPENAI_STYLE,
           "spec.env.LLM", f"{SHAPED} an API secret key", OPENAI_STYLE),
    Secret("private key block in env", job(
        f"env:\n  DEPLOY: |\n    {PRIVATE_KEY}\n    b3BlbnNzaC1rZXktdjEAAAAA\n"), "|",
        "spec.env.DEPLOY", f"{SHAPED} a private key", "b3BlbnNzaC1rZXktdjEAAAAA"),
    Secret("JSON Web Token in an annotation", _with_metadata(f"annotations: {{auth: {JWT}}}\n"),
           JWT, "metadata.annotations.auth", f"{SHAPED} a JSON Web Token", JWT),
    Secret("Azure connection string in env", job(f"env: {{STORAGE: '{AZURE}'}}\n"), "'Default",
           "spec.env.STORAGE", f"{SHAPED} an Azure storage key", "Zm9vYmFy"),
    Secret("JSON Web Token run on from other letters", job(f"args: ['--auth=Bearer{JWT}']\n"),
           "'--auth", "spec.args[0]", f"{SHAPED} a JSON Web Token", JWT),
    Secret("password in a URL whose scheme follows digits", job(
        f"args: ['--db=1+{DATABASE_URL}']\n"), "'--db", "spec.args[0]",
        f"{SHAPED} a password in a URL", PASSWORD),
    Secret("password in a URL in env", job(f"env: {{DATABASE_URL: '{DATABASE_URL}'}}\n"),
           "'postgres", "spec.env.DATABASE_URL", f"{SHAPED} a password in a URL", PASSWORD),
    Secret("password in a URL in args", job(f"args: ['--db={DATABASE_URL}']\n"), "'--db",
           "spec.args[0]", f"{SHAPED} a password in a URL", PASSWORD),
    Secret("password in an image reference", job().replace(
        "image: tensorflow/tensorflow:2.16.1",
        f"image: 'trainer:{PASSWORD}@registry.example.com/tf:2.16'"), "'trainer",
        "spec.image", f"{SHAPED} a password in an image reference", PASSWORD),
    Secret("password in a role's image URL", job(roles=(
        f"    worker: {{replicas: 2, image: 'https://u:{PASSWORD}@r.example.com/tf'}}")),
        "'https", "spec.roles.worker.image", f"{SHAPED} a password in a URL", PASSWORD),
    Secret("token in a TensorBoard image", job(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
        f"tensorboard: {{logDir: /mnt/shared/logs, image: 'r.example.com/{GITHUB_TOKEN}'}}\n"),
        "'r.example", "spec.tensorboard.image", f"{SHAPED} a GitHub token", GITHUB_TOKEN),
    Secret("AWS key id as an annotation key", _with_metadata(
        f"annotations: {{example.com/{AWS_KEY_ID}: x}}\n"), "example.com/",
        "metadata.annotations.(hidden key)", "the key holds what looks like", AWS_KEY_ID),
    Secret("password-named env variable", job(f"env: {{DB_PASSWORD: {PASSWORD}}}\n"), PASSWORD,
           "spec.env.DB_PASSWORD", f"variable's name says it is a secret, and {NAMED}; secret "
           "values never belong in git: use {secretKeyRef", PASSWORD),
    Secret("camelCase API key variable in a role", job(roles=(
        f"    worker: {{replicas: 2, env: {{wandbApiKey: {PASSWORD}}}}}")), PASSWORD,
        "spec.roles.worker.env.wandbApiKey", NAMED, PASSWORD),
    Secret("passphrase variable as {value: …}", job(
        f"env: {{KEY_PASSPHRASE: {{value: {PASSWORD}}}}}\n"), PASSWORD,
        "spec.env.KEY_PASSPHRASE.value", NAMED, PASSWORD),
    Secret("GITHUB_TOKEN variable", job(f"env: {{GITHUB_TOKEN: {PASSWORD}}}\n"), PASSWORD,
           "spec.env.GITHUB_TOKEN", NAMED, PASSWORD),
    Secret("secret-named label", _with_metadata(f"labels: {{api-secret: {PASSWORD}}}\n"),
           PASSWORD, "metadata.labels.api-secret", "label's key says it is a secret", PASSWORD),
    Secret("secret-named annotation", _with_metadata(
        f"annotations: {{example.com/db-password: {PASSWORD}}}\n"), PASSWORD,
        "metadata.annotations.example.com/db-password", "annotation's key says", PASSWORD),
    Secret("--password=… in args", job(f"args: ['--password={PASSWORD}']\n"), "'--password",
           "spec.args[0]", f"passes a literal value to --password, {OPTION}", PASSWORD),
    Secret("--api-key … as two items of args",
           job(f"args: [--epochs, '3', --api-key, {PASSWORD}]\n"), PASSWORD,
           "spec.args[3]", f"passes a literal value to --api-key, {OPTION}", PASSWORD),
    Secret("--token … inside a shell command", job().replace(
        "command: [python, /app/train.py]",
        f"command: [sh, -c, 'python train.py --token {PASSWORD}']"), "'python",
        "spec.command[2]", f"passes a literal value to --token, {OPTION}", PASSWORD),
    Secret("NAME=value inside a shell command of a role", job(roles=(
        f"    worker: {{replicas: 2, command: [sh, -c, 'PGPASSWORD={PASSWORD} python t.py']}}")),
        "'PGPASSWORD", "spec.roles.worker.command[2]", "passes a literal value to PGPASSWORD",
        PASSWORD),
    Secret("?token= in a URL", job(f"args: ['https://api.example.com/v1?token={PASSWORD}']\n"),
           "'https", "spec.args[0]", "passes a literal value to token", PASSWORD),
    Secret("flag with a value in an env string", job(
        f"env: {{EXTRA_FLAGS: '--secret={PASSWORD} --epochs=3'}}\n"), "'--secret",
        "spec.env.EXTRA_FLAGS", "passes a literal value to --secret", PASSWORD),
    Secret("Azure storage account key under any name",
           job(f"env: {{STORE: '{AZURE_ACCOUNT_KEY}'}}\n"), "'" + AZURE_ACCOUNT_KEY[:6],
           "spec.env.STORE", f"{SHAPED} an Azure storage account key", AZURE_ACCOUNT_KEY),
    Secret("Azure storage account key in an option", job(
        f"args: ['--blob={AZURE_ACCOUNT_KEY}']\n"), "'--blob", "spec.args[0]",
        f"{SHAPED} an Azure storage account key", AZURE_ACCOUNT_KEY),
    Secret("the Azure CLI's storage key variable", job(
        f"env: {{AZURE_STORAGE_KEY: {PASSWORD}}}\n"), PASSWORD, "spec.env.AZURE_STORAGE_KEY",
        f"variable's name says it is a secret, and {NAMED}", PASSWORD),
    Secret("AWS secret access key alone under any name", job(
        f"env: {{S3_SETTINGS: '{AWS_SECRET}'}}\n"), "'wJal", "spec.env.S3_SETTINGS",
        f"{SHAPED} an AWS secret access key", AWS_SECRET),
    Secret("AWS secret access key in a role's args", job(roles=(
        f"    worker: {{replicas: 2, args: [--s3, '{AWS_SECRET}']}}")), "'wJal",
        "spec.roles.worker.args[1]", f"{SHAPED} an AWS secret access key", AWS_SECRET),
    Secret("plain AWS secret access key beside its key id", job(
        f"env: {{ID: {AWS_KEY_ID}, SIDE: '{PLAIN_AWS_SECRET}'}}\n"), "'Ab1", "spec.env.SIDE",
        f"{SHAPED} an AWS secret access key (the job also holds an AWS access key id)",
        PLAIN_AWS_SECRET),
    Secret("Google Cloud service-account key JSON", job(
        f"env: {{SA_JSON: '{GOOGLE_SERVICE_ACCOUNT}'}}\n"), "'{", "spec.env.SA_JSON",
        f"{SHAPED} a Google Cloud service-account key", GOOGLE_PRIVATE_KEY),
    Secret("GitHub app token in args", job(f"args: [--hub, {GITHUB_APP_TOKEN}]\n"),
           GITHUB_APP_TOKEN, "spec.args[1]", f"{SHAPED} a GitHub token", GITHUB_APP_TOKEN),
    Secret("Slack app-level token in env", job(f"env: {{NOTIFY: {SLACK_APP_TOKEN}}}\n"),
           SLACK_APP_TOKEN, "spec.env.NOTIFY", f"{SHAPED} a Slack token", SLACK_APP_TOKEN),
    Secret("value-shaped credential under a name listed as not secret", job(
        f"notSecret: [SESSION_TOKEN]\nenv: {{SESSION_TOKEN: {GITHUB_TOKEN}}}\n"), GITHUB_TOKEN,
        "spec.env.SESSION_TOKEN", f"{SHAPED} a GitHub token", GITHUB_TOKEN),
    Secret("notSecret entry that does not look secret", job(
        "notSecret: [EPOCHS]\nenv: {EPOCHS: '3'}\n"), "EPOCHS]", "spec.notSecret[0]",
        "this name does not look secret", "no-value-here"),
    Secret("notSecret entry nothing uses", job("notSecret: [LEGACY_TOKEN]\n"), "LEGACY_TOKEN",
           "spec.notSecret[0]", "no name with a literal value in this job matches it",
           "no-value-here"),
]


@pytest.mark.parametrize("secret", SECRETS, ids=[s.name for s in SECRETS])
def test_each_literal_credential_is_refused_at_its_place_without_its_value(
    secret: Secret,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _refused_at(run_cli, secret.text, secret.at, secret.field, secret.says)
    assert secret.value not in result.stdout + result.stderr


NOT_SECRETS = [
    ("a tokenizer path", "env: {TOKENIZER_PATH: /models/tokenizer.json}\n"),
    ("a token count", "env: {MAX_TOKENS: '4096'}\nargs: [--max-tokens, '4096', --num_tokens=8]\n"),
    ("a password file", "env: {DB_PASSWORD_FILE: /run/secrets/db}\n"),
    ("the name of a Secret", "env: {SECRET_NAME: s3-credentials}\n"),
    ("a token endpoint", "env: {TOKEN_URL: 'https://auth.example.com/token'}\n"),
    ("a Kubernetes reference", "env:\n  DB_PASSWORD: {secretKeyRef: {name: db, key: pw}}\n"
     "  DATABASE_URL: 'postgres://trainer:$(DB_PASSWORD)@db:5432/runs'\n"
     "args: ['--password=$(DB_PASSWORD)', --token, $(API_TOKEN)]\n"),
    ("a switch", "args: [--use-token, 'true', --secret-scan=false]\n"),
    ("an empty value", "env: {API_TOKEN: ''}\n"),
    ("a digest-pinned image", "tensorboard: {logDir: /mnt/shared/logs, image: "
     "'busybox:1.36@sha256:" + "ab" * 32 + "'}\nstorage: {shared: {mountPath: /mnt/shared, "
     "size: 1Gi}}\n"),
    ("a URL without a password", "env: {HUB: 'https://trainer@hub.example.com/x'}\n"),
    ("the working directory variable", "env: {PWD: /workspace}\n"),
    ("names listed in notSecret", "notSecret: [PAD_TOKEN, eosToken]\n"
     "env: {PAD_TOKEN: '[PAD]'}\nargs: ['--eos-token=</s>']\n"),
    ("names that say something about a secret", "env: {TOKEN_LIMIT: '5', "
     "SECRET_KEY_REF: x, API_KEY_ID: y}\n"),
    # Near misses of the credential shapes: each looks like one and is not.
    ("a git commit of 40 hexadecimal characters",
     "args: [--revision, 3f786850e387550fdab836ed7e6dc881de23001b]\n"),
    ("a path of 40 characters", "env: {CHECKPOINTS: models/ResNet50/v2/checkpoints/epoch0001}\n"),
    ("a CamelCase name of 40 characters", "args: [--kind, K8sIoApimachineryPkgApisMetaV1Object"
     "Meta]\n"),
    ("a SHA-512 digest written as one", f"args: ['--integrity=sha512-{AZURE_ACCOUNT_KEY}']\n"),
    ("a base64 SHA-256 digest", "env: {MODEL_SHA256: '"
     + base64.b64encode(bytes(range(32))).decode() + "'}\n"),
    ("Hugging Face cache folders", "env: {HF_HOME: /data/hf_cache, TRANSFORMERS_CACHE: "
     "/models/hf_downloadedcheckpointsfromthehubcache}\n"),
    ("a Slack token placeholder", "env: {SLACK_HINT: xoxb-your-token-here}\n"),
    ("a GitHub-like branch name", "args: [--branch, ghp_fix-login]\n"),
    ("an AWS-like name longer than a key id", "env: {RUN: AKIAXXXXXXXXXXXXXXXXEXTRA}\n"),
    ("a service account without a key", "env: {SA_JSON: '{\"type\": \"service_account\", "
     "\"client_email\": \"trainer@p.iam.gserviceaccount.com\"}'}\n"),
    ("a certificate", "env: {CA_BUNDLE: '-----BEGIN CERTIFICATE-----'}\n"),
    ("what is said about an Azure storage key", "env: {AZURE_STORAGE_KEY_FILE: "
     "/var/run/secrets/azure/key, AZURE_STORAGE_ACCOUNT: trainingdata}\n"),
]


@pytest.mark.parametrize("text", [text for _, text in NOT_SECRETS],
                         ids=[name for name, _ in NOT_SECRETS])
def test_what_only_looks_secret_builds(
    text: str, write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    path = write_job(job(text))
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr


SCRIPT_JOB = job().replace("  command: [python, /app/train.py]\n", "  script: train.py\n")


@pytest.mark.parametrize(("script", "says", "value"), [
    (f"import os\n\nTOKEN = '{HUGGING_FACE}'\n", "a Hugging Face token", HUGGING_FACE),
    (f"KEYS = {{\n    'id': '{AWS_KEY_ID}',\n    'secret': '{PLAIN_AWS_SECRET}',\n}}\n",
     "an AWS access key id", AWS_KEY_ID),
    (f"\n\n\nSTORAGE = '{AZURE_ACCOUNT_KEY}'\n", "an Azure storage account key",
     AZURE_ACCOUNT_KEY),
    (f"ACCOUNT = {GOOGLE_SERVICE_ACCOUNT!r}\n", "a Google Cloud service-account key",
     GOOGLE_PRIVATE_KEY),
], ids=["Hugging Face token", "AWS key pair", "Azure storage account key",
        "Google Cloud service-account key"])
def test_a_credential_in_the_script_is_refused_at_the_script_field(
    script: str, says: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    """The script is shipped in a ConfigMap: its files are scanned for credentials by shape
    too, and a problem names the file and the line, never the value."""
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(script, encoding="utf-8")
    line = next(number for number, text in enumerate(script.splitlines(), 1) if value in text)
    result = _refused_at(run_cli, SCRIPT_JOB, "train.py", "spec.script",
                         f"file train.py, line {line}, holds what looks like {says}")
    assert value not in result.stdout + result.stderr
    if says == "an AWS access key id":
        assert "line 3, holds what looks like an AWS secret access key" in result.stderr


def test_a_script_without_credentials_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result],
) -> None:
    """What scripts hold and only looks like a credential: a cache folder, a commit, a URL
    built from variables, a digest, a CamelCase name."""
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(textwrap.dedent(f"""\
        import os
        CACHE = "/data/hf_cache"
        REVISION = "3f786850e387550fdab836ed7e6dc881de23001b"
        URL = f"postgres://{{os.environ['USER']}}:{{os.environ['PASSWORD']}}@db:5432/runs"
        DIGEST = "sha512-{AZURE_ACCOUNT_KEY}"
        KIND = "K8sIoApimachineryPkgApisMetaV1ObjectMeta"
        """), encoding="utf-8")
    Path("job.yaml").write_text(SCRIPT_JOB, encoding="utf-8")
    result = run_cli("build", "job.yaml", "-o", "output")
    assert result.status == 0, result.stderr


def test_a_service_account_key_as_a_mapping_is_found() -> None:
    """A service-account key's JSON written as YAML (a mapping, in any field) is found too."""
    from tfcompile.spec.secrets import find_literal_secrets

    data = {"spec": {"x-account": {"type": "service_account", "private_key": "k"}}}
    assert [(problem.path, "a Google Cloud service-account key" in problem.message)
            for problem in find_literal_secrets(data)] == [(("spec", "x-account"), True)]


SELECTORS_THAT_BUILD = [
    ("tfcompile's role label", _pod_spec(ANTI_AFFINITY.format(
        labels="{tfcompile.dev/job: demo, tfcompile.dev/role: worker}"))),
    ("a TFJob label the job's pods carry", job(roles=(
        "    worker:\n      replicas: 2\n      podTemplate:\n"
        "        metadata: {labels: {training.kubeflow.org/job-name: demo}}\n        spec:\n"
        + textwrap.indent(ANTI_AFFINITY.format(labels="{training.kubeflow.org/job-name: demo}"),
                          "          ")))),
    ("the older job-name label, which a Kubernetes Job's pods carry too", _pod_spec(
        ANTI_AFFINITY.format(labels="{job-name: dataset-download}"))),
]


@pytest.mark.parametrize("text", [text for _, text in SELECTORS_THAT_BUILD],
                         ids=[name for name, _ in SELECTORS_THAT_BUILD])
def test_selectors_that_may_select_pods_build(
    text: str, write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    """Only the training operator's own labels, on pods that lack them, are refused; the older
    unprefixed ones are left to `validate`, which warns."""
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr


def test_the_labels_named_instead_are_the_ones_pods_carry() -> None:
    """The spec names tfcompile's pod labels without importing the compiler: the same names."""
    from tfcompile.compiler.objects import labels
    from tfcompile.spec import tfjob_selectors

    assert (tfjob_selectors.ROLE_LABEL, tfjob_selectors.JOB_LABEL,
            tfjob_selectors.POD_INDEX_LABEL) == (labels.ROLE_LABEL, labels.JOB_LABEL,
                                                 labels.POD_INDEX_LABEL)
    assert tfjob_selectors.MANAGED_BY_LABEL == "app.kubernetes.io/managed-by"
