"""The Kubernetes versions compiled output is checked against: the default and the oldest, and
the first that enforces the launcher policy.

Constants on their own, so that the command line can name them in `--help` without loading
the validator and its schema machinery for every command (`build` never needs them). Why these
two versions: see `validation/versions.py`.
"""

from __future__ import annotations

DEFAULT_KUBERNETES_VERSION = "1.33"
OLDEST_KUBERNETES_VERSION = "1.28"
ADMISSION_POLICY_KUBERNETES_VERSION = "1.30"
"""ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) from here on: older
clusters cannot enforce the launcher policy that `init` writes."""
