"""The Kubernetes versions compiled output is checked against: the default and the oldest.

Two constants on their own, so that the command line can name them in `--help` without loading
the validator and its schema machinery for every command (`build` never needs them). Why these
two versions: see `validation/versions.py`.
"""

from __future__ import annotations

DEFAULT_KUBERNETES_VERSION = "1.33"
OLDEST_KUBERNETES_VERSION = "1.28"
