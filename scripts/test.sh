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
  # tfcompile renders with a standalone kustomize when one is on PATH: the one Argo CD's
  # repo-server runs, built above, so the tests render as the users' Argo CD does (and with
  # components in under half the CPU of kubectl's older kustomize).
  ln -sf "$(bash scripts/control-plane.sh kustomize-binary)" "$venv/bin/kustomize"
fi
# Every tier, in two pytest processes side by side, as the machine has two cores: the tests that
# run pods on the real node (marker `node`; one node runs on a machine at a time, so they share
# one, started once), and every other test (`-m "not node"` lifts the fast-tier default of
# pyproject.toml; the cluster tier's control plane is started once for its tests). The node's
# output is printed after the other's, so neither interleaves; the suite fails if either does.
node_log=$(mktemp)
trap 'rm -f "$node_log"' EXIT
python -m pytest -m node -p no:xdist "$@" >"$node_log" 2>&1 &
node_tests=$!
status=0
python -m pytest -m "not node" -p no:xdist "$@" || status=$?
node_status=0
wait "$node_tests" || node_status=$?
echo "--- the tests that run pods on the real node (marker node):"
cat "$node_log"
# pytest's 5 (no test collected) is a failure here too: both selections must run tests.
[ "$status" -eq 0 ] && [ "$node_status" -eq 0 ]
