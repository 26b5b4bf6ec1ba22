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
# Debian's packages the tests' cluster needs, installed here when missing and when this machine
# can (root and apt-get); otherwise those tests fail saying what to install:
# - redis-server, which Argo CD's controllers need (tests/gitops/);
# - the real node's container runtime (containerd, runc), CNI plugins, iptables and conntrack
#   (kube-proxy), and debootstrap, which builds the root file systems of its images
#   (scripts/node.sh, scripts/node-images.sh);
# - podman, with which `tfcompile run-local` runs pods in their images, its network backend
#   (netavark) and the init its pods' infra containers run (catatonit).
wanted=()
for entry in redis-server:redis-server containerd:containerd runc:runc \
    /usr/lib/cni/bridge:containernetworking-plugins iptables:iptables conntrack:conntrack \
    debootstrap:debootstrap gcc:gcc podman:podman /usr/lib/podman/netavark:netavark \
    /usr/lib/podman/aardvark-dns:aardvark-dns catatonit:catatonit; do
  if [ "${entry:0:1}" = / ]; then
    [ -e "${entry%%:*}" ] || wanted+=("${entry#*:}")
  else
    command -v "${entry%%:*}" >/dev/null || wanted+=("${entry#*:}")
  fi
done
if [ ${#wanted[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  # Debian's packages would start services of their own (Redis, containerd): the tests start
  # theirs.
  policy=/usr/sbin/policy-rc.d
  created_policy=false
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && created_policy=true
  fi
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${wanted[@]}" >/dev/null; }; then
    echo "could not install ${wanted[*]}: the cluster, GitOps and run-local tests will fail" >&2
  fi
  if $created_policy; then rm -f "$policy"; fi
fi
if ! command -v kustomize >/dev/null && ! command -v kubectl >/dev/null; then
  echo "tfcompile needs kustomize or kubectl on PATH to render manifests" >&2
  exit 1
fi
