#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, linters, type checks, layering, tests.
source "$(dirname "$0")/setup.sh"
ruff check .
mypy -p tfcompile.spec -p tfcompile.compiler -p tests
PYTHONPATH=.typing lint-imports
# The cluster tests (tests/cluster/) start a local control plane, the tests that run pods a real
# node beside it (a kubelet, containerd, CoreDNS, kube-proxy, and images built on this machine),
# and the GitOps tests (tests/gitops/) Argo CD and Flux on that node; build them first, in the
# open (see docs/development.md for the times; cached afterwards). Without Go, those tests fail
# saying so; without root, the node's tests do.
if command -v go >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    bash scripts/control-plane.sh build --node --gitops both
  else
    bash scripts/control-plane.sh build --gitops both
  fi
fi
# Every tier (`-m ""` lifts the fast-tier default of pyproject.toml), over the cores: each
# control plane's tests share one worker (--dist loadgroup), the rest spread over the others.
python -m pytest -m "" --numprocesses auto --dist loadgroup "$@"
