"""The job itself: its metadata and its spec, which gathers every other part of the spec.
"""

from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
)

from .base import (
    EnvironmentName,
    JobName,
    LabelKey,
    LabelValue,
    NamespaceName,
    NonEmptyText,
    NotSecretName,
    OverlayName,
    SpecModel,
    Text,
    _no_entries,
    _no_items,
)
from .lifecycle import (
    Compatibility,
    Duration,
    FailurePolicy,
    Launcher,
    OnFailure,
    OnSuccess,
    duration_seconds,
)
from .roles import (
    EnvironmentSource,
    EnvironmentValue,
    NetworkPolicySettings,
    PodTemplate,
    Roles,
    Strategy,
)
from .scheduling import Scheduling
from .storage import Storage
from .sweep import Sweep
from .tensorboard import TensorBoard


class Metadata(SpecModel):
    name: JobName
    namespace: NamespaceName | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=_no_entries)
    annotations: dict[LabelKey, Text] = Field(default_factory=_no_entries)


class JobSpec(SpecModel):
    image: NonEmptyText
    command: list[NonEmptyText] | None = None
    args: list[Text] = Field(default_factory=_no_items)
    script: NonEmptyText | None = Field(
        default=None,
        description="A file, or a folder (a training package: every file, nested folders kept), "
        "relative to the job file and inside its repository, shipped in a ConfigMap mounted at "
        "/opt/tfcompile/script/. Without command a file runs as `python "
        "/opt/tfcompile/script/<file>`; a folder needs command to name its entrypoint.",
    )
    env: dict[EnvironmentName, EnvironmentValue] = Field(default_factory=_no_entries)
    env_from: list[EnvironmentSource] = Field(default_factory=_no_items)
    port: Annotated[StrictInt, Field(ge=1, le=65535)] = 2222
    strategy: Strategy | None = None
    roles: Roles
    storage: Storage = Field(default_factory=Storage)
    tensorboard: TensorBoard | None = None
    overlays: list[OverlayName] = Field(default_factory=_no_items)
    network_policy: NetworkPolicySettings = Field(
        default_factory=NetworkPolicySettings,
        description="Emit a NetworkPolicy admitting this job's own pods on every port (false: "
        "none); `{ingress: [...]}` admits more sources.",
    )
    suspend: StrictBool = False
    compatibility: list[Compatibility] = Field(
        default_factory=_no_items,
        description="Earlier tools whose scripts run unchanged: tf-spawner sets WORKER_NUMBER "
        "and TOT_WORKERS, elasticdl NUM_WORKERS, tf1-flags JOB_NAME, PS_HOSTS and WORKER_HOSTS.",
    )
    not_secret: list[NotSecretName] = Field(
        default_factory=_no_items,
        description=(
            "Names that only look secret (an env variable, label or annotation key, or option "
            "such as a tokenizer's PAD_TOKEN) whose literal values are allowed. Names match by "
            "their words (DB_TOKEN = db-token = dbToken). Values shaped like credentials are "
            "refused all the same."
        ),
    )
    pod_template: PodTemplate | None = None
    scheduling: Scheduling = Field(default_factory=Scheduling)

    def network_policy_settings(self) -> NetworkPolicySettings | None:
        """The NetworkPolicy's settings, or None when the job asks for none."""
        return self.network_policy if self.network_policy.enabled else None
    launcher: Launcher = Field(
        default=Launcher.PYTHON,
        description="python: tfcompile's launcher runs the command (the image needs python, "
        "CPython or PyPy 3.8 or later, on PATH): it records success and idles, and gives "
        "onSuccess, onFailure, failurePolicy, deadline, a sweep's results and the revision "
        "gate. none: the container runs the command itself, for images without it (TensorFlow "
        "1.x): an exit 0 restarts the training, nothing is recorded, and those fields are "
        "refused.",
    )
    on_success: OnSuccess = Field(
        default=OnSuccess.IDLE,
        description="idle (the default): succeeded pods stay and idle, with their logs; "
        "release: the job's own pods scale its StatefulSets to 0 once it has succeeded (a job "
        "that gave up is onFailure's).",
    )
    failure_policy: FailurePolicy | None = Field(
        default=None,
        description="Stop retrying a failing task (omitted: the kubelet restarts it forever).",
    )
    on_failure: OnFailure = Field(
        default=OnFailure.IDLE,
        description="idle (the default): a job that gave up (failurePolicy or deadline) keeps "
        "its pods, idling, with their logs; release: its own pods scale its StatefulSets to 0.",
    )
    deadline: Duration | None = Field(
        default=None,
        description="How long a revision may train, in hours, minutes and seconds (48h, 90m, "
        "1h30m): then it is stopped and recorded as failed. Omitted: no limit.",
    )

    def deadline_seconds(self) -> int | None:
        """The deadline in seconds, or None when the job has none."""
        return None if self.deadline is None else duration_seconds(self.deadline)
    sweep: Sweep | None = Field(
        default=None,
        description="A hyper-parameter grid: one job (trial) per point, named <name>-<digest "
        "of the point's values>, each with its own output directory.",
    )

    def resolved_strategy(self) -> Strategy:
        """The strategy given, or the one inferred: ParameterServer when the job has ps."""
        if self.strategy is not None:
            return self.strategy
        if self.roles.ps is not None:
            return Strategy.PARAMETER_SERVER
        return Strategy.MULTI_WORKER_MIRRORED


class TrainingJob(SpecModel):
    """A distributed TensorFlow training job, compiled by tfcompile into Kubernetes YAML."""

    model_config = ConfigDict(title="TrainingJob")

    api_version: Literal["tfcompile.dev/v1alpha1"]
    kind: Literal["TrainingJob"]
    metadata: Metadata
    spec: JobSpec
