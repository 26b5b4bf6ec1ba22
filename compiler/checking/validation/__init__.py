"""Check compiled output as a cluster would receive it: render, then schemas and topology."""

from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    OLDEST_KUBERNETES_VERSION,
    KubernetesVersionError,
    known_versions,
)

from .report import ObjectProblem, Prerequisite, ValidationReport
from .validator import validate, validate_rendered

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "OLDEST_KUBERNETES_VERSION",
    "KubernetesVersionError",
    "ObjectProblem",
    "Prerequisite",
    "ValidationReport",
    "known_versions",
    "validate",
    "validate_rendered",
]
