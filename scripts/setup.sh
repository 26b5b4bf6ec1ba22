# Shared by the scripts in this folder: a virtualenv in .venv with tfcompile and what the
# tests and the local training run need. Sourced, not run.
set -euo pipefail
repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repository"
venv=${TFCOMPILE_VENV:-$repository/.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
stamp="$venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # The working tree is installed editable; setuptools' notice that an editable install
  # prefers folders of the same name is informational, so it is not printed.
  PYTHONWARNINGS="ignore:Editable installation" \
    "$venv/bin/python" -m pip install --quiet -e ".[test,training]"
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
# kubeconform, which the scaffold's CI runs, runs for real in the tests: built from source with
# Go into the virtualenv, once per version.
kubeconform_version=v0.7.0
if [ ! -e "$venv/.kubeconform-$kubeconform_version" ]; then
  if command -v go >/dev/null; then
    GOBIN="$venv/bin" go install "github.com/yannh/kubeconform/cmd/kubeconform@$kubeconform_version"
    touch "$venv/.kubeconform-$kubeconform_version"
  else
    echo "Go is not installed, so kubeconform is not: the tests that run it will fail" >&2
  fi
fi
# Redis, which Argo CD's controllers need in the GitOps tests (tests/gitops/): Debian's package,
# installed here when missing and when this machine can (root and apt-get); otherwise those tests
# fail saying what to install.
if ! command -v redis-server >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null
then
  # Debian's package would start a Redis service of its own: the tests start theirs.
  policy=/usr/sbin/policy-rc.d
  created_policy=false
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && created_policy=true
  fi
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends redis-server >/dev/null; }; then
    echo "could not install redis-server: the Argo CD tests will fail" >&2
  fi
  if $created_policy; then rm -f "$policy"; fi
fi
if ! command -v kustomize >/dev/null && ! command -v kubectl >/dev/null; then
  echo "tfcompile needs kustomize or kubectl on PATH to render manifests" >&2
  exit 1
fi
