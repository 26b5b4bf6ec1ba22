#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, linters, type checks, layering, tests.
source "$(dirname "$0")/setup.sh"
ruff check .
mypy -p tfcompile.spec -p tfcompile.compiler -p tests
PYTHONPATH=.typing lint-imports
# The cluster tests (tests/cluster/) start a local control plane, and the GitOps tests
# (tests/gitops/) Argo CD and Flux beside it; build them first, in the open (about 13 minutes
# for the control plane, 12 for Flux and 15 for Argo CD on two cores the first time, cached
# afterwards). Without Go, those tests fail saying so.
if command -v go >/dev/null; then
  bash scripts/control-plane.sh build --gitops both
fi
# Every tier (`-m ""` lifts the fast-tier default of pyproject.toml), over the cores: each
# control plane's tests share one worker (--dist loadgroup), the rest spread over the others.
python -m pytest -m "" --numprocesses auto --dist loadgroup "$@"
