#!/usr/bin/env bash
# A real Kubernetes control plane on this machine's loopback, for the cluster tests and for trying
# `tfcompile validate --server`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.
#
#   scripts/control-plane.sh up      build what is missing, start, wait until healthy, then print
#                                    `export KUBECONFIG=...` on standard output
#   scripts/control-plane.sh up --node   also a real node (scripts/node.sh; needs root): a
#                                    kubelet, containerd and runc, CNI, kube-proxy and CoreDNS,
#                                    with the images the examples and `init`'s job name built
#                                    locally (scripts/node-images.sh) and loaded
#   scripts/control-plane.sh up [--node] --gitops argocd|flux|both
#                                    also a git server over smart HTTP and, out of cluster,
#                                    Argo CD (namespace argocd) and/or Flux (flux-system);
#                                    prints `export TFCOMPILE_GIT_ROOT=...` (a bare repository
#                                    made there as NAME.git is served) and `export
#                                    TFCOMPILE_GIT_URL=...` (its base URL, push allowed) too
#   scripts/control-plane.sh down    stop them and remove everything they wrote
#   scripts/control-plane.sh build [--node] [--gitops argocd|flux|both]
#                                    only build the binaries (and with --node the images)
#
# Without --node there is no node: the scheduler finds nowhere to place pods, so they stay
# Pending. That is enough to see what the API server accepts and what the controllers create.
#
# Binaries: each of etcd, kube-apiserver, kube-controller-manager and kube-scheduler is taken from
# TFCOMPILE_CONTROL_PLANE_BINARIES (a directory), else from KUBEBUILDER_ASSETS (envtest's
# directory, which has etcd and kube-apiserver), else built from source with Go by the small
# module in scripts/control-plane/ into the cache directory below, once per release.
#
# Environment:
#   TFCOMPILE_CONTROL_PLANE_DIR    where a running control plane keeps its certificates, data and
#                                  logs (default: $TMPDIR/tfcompile-control-plane); `down` removes it
#   TFCOMPILE_CONTROL_PLANE_CACHE  where built binaries are kept
#                                  (default: $XDG_CACHE_HOME/tfcompile/control-plane)
#   TFCOMPILE_GITOPS_CACHE         where the GitOps controllers are kept
#                                  (default: $XDG_CACHE_HOME/tfcompile/gitops); see gitops.sh
#   TFCOMPILE_CONTROL_PLANE_TIMEOUT  seconds to wait for health (default: 180)
#   TFCOMPILE_IMAGE_CACHE          where the node's images are kept (see node-images.sh)
#   TFCOMPILE_NODE_CLAIMS          how many local volumes the node offers claims (default: 96)
set -euo pipefail

repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
module="$repository/scripts/control-plane"
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
run_directory=${TFCOMPILE_CONTROL_PLANE_DIR:-${TMPDIR:-/tmp}/tfcompile-control-plane}
# Its path without links: the kernel names mounts by it, and `down` finds them by it.
run_directory=$(realpath -m "$run_directory")
timeout_seconds=${TFCOMPILE_CONTROL_PLANE_TIMEOUT:-180}
marker=.tfcompile-control-plane
service_cluster_ip_range=10.0.0.0/24
kubernetes_service_ip=10.0.0.1
node_name=tfcompile-node

say() { echo "control-plane: $*" >&2; }
fail() { say "$*"; exit 1; }

# shellcheck source=go-modules.sh
source "$repository/scripts/go-modules.sh"
# shellcheck source=gitops.sh
source "$repository/scripts/gitops.sh"
# shellcheck source=node.sh
source "$repository/scripts/node.sh"

release() {
  go_module_version "$module" k8s.io/kubernetes
}

# The build directory is named after the release and a digest of the wrapper's own files, so a
# changed wrapper builds again and two releases live side by side.
build_directory() {
  echo "${TFCOMPILE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfcompile/control-plane}/$(release)-$(go_module_digest "$module")"
}

# Where component $1 comes from: a prebuilt directory when it has it, else the build directory.
binary_of() {
  local directory
  for directory in "${TFCOMPILE_CONTROL_PLANE_BINARIES:-}" "${KUBEBUILDER_ASSETS:-}"; do
    if [ -n "$directory" ] && [ -x "$directory/$1" ]; then
      echo "$directory/$1"
      return
    fi
  done
  echo "$(build_directory)/bin/$1"
}

build_control_plane() {
  local missing=() component
  for component in "${components[@]}"; do
    [ -x "$(binary_of "$component")" ] || missing+=("$component")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v go >/dev/null || fail "Go is needed to build ${missing[*]} from source (Go $(
    awk '$1 == "go" { print $2 }' "$module/go.mod") or newer: https://go.dev/dl/), or set \
TFCOMPILE_CONTROL_PLANE_BINARIES to a directory with prebuilt ${components[*]}"
  local version flags="-s -w" package minor entries=()
  version=$(release)
  minor=${version#v1.}
  minor=${minor%%.*}
  # What Kubernetes' own build stamps, so `kubectl version` and the API report the release.
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $package.gitVersion=$version -X $package.gitMajor=1 -X $package.gitMinor=$minor"
    flags+=" -X $package.gitTreeState=clean -X $package.buildDate=1970-01-01T00:00:00Z"
  done
  for component in "${missing[@]}"; do
    entries+=("$component=./cmd/$component")
  done
  GO_MODULE_ANNOUNCE="building ${missing[*]} of Kubernetes $version from source (first time \
only; about 15 minutes on two cores)" GO_MODULE_LDFLAGS=$flags \
    go_module_build "$module" "$(build_directory)" "${entries[@]}"
}

# The control plane, and with `--gitops TOOLS` the GitOps controllers too.
build() {
  local gitops="" with_node=false
  while [ $# -gt 0 ]; do
    case $1 in
      --node) with_node=true; shift ;;
      --gitops) [ $# -ge 2 ] || fail "build: --gitops needs argocd, flux or both"
        gitops=$2; shift 2 ;;
      *) fail "build: unknown option $1 (usage: $0 build [--node] [--gitops \
argocd|flux|both])" ;;
    esac
  done
  build_control_plane
  if $with_node; then
    build_coredns
    bash "$repository/scripts/node-images.sh" build
  fi
  if [ -n "$gitops" ]; then
    build_gitops "$gitops"
  fi
}

# Free loopback ports below the kernel's ephemeral range (tests/free_ports.py says why).
free_ports() {
  python3 "$repository/tests/free_ports.py" "$1"
}

certificates() {
  local pki="$run_directory/pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -keyout ca.key -out ca.crt \
      -subj "/CN=tfcompile-control-plane-ca" 2>/dev/null
    # name, subject, extended key usage, subject alternative names
    issue() {
      local extensions="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$3"
      [ -n "${4:-}" ] && extensions+="
subjectAltName=$4"
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
        -extfile <(echo "$extensions") -out "$1.crt" 2>/dev/null
      rm "$1.csr"
    }
    local loopback="IP:127.0.0.1,DNS:localhost,IP:$node_address"
    issue etcd-server "/CN=etcd" serverAuth "$loopback"
    issue apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
    issue apiserver "/CN=kube-apiserver" serverAuth "$loopback,IP:$kubernetes_service_ip,\
DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,\
DNS:kubernetes.default.svc.cluster.local"
    issue admin "/O=system:masters/CN=kubernetes-admin" clientAuth
    issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
    issue controller-manager "/CN=system:kube-controller-manager" clientAuth
    issue scheduler "/CN=system:kube-scheduler" clientAuth
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out service-account.key \
      2>/dev/null
    openssl pkey -in service-account.key -pubout -out service-account.pub 2>/dev/null
    rm -f ca.srl
  )
}

kubeconfig() {  # name, client certificate name
  cat >"$run_directory/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tfcompile-local
  cluster:
    server: https://$api_address:$apiserver_port
    certificate-authority: $run_directory/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $run_directory/pki/$2.crt
    client-key: $run_directory/pki/$2.key
contexts:
- name: tfcompile-local
  context: {cluster: tfcompile-local, user: $2, namespace: default}
current-context: tfcompile-local
EOF
}

start() {  # name, command...
  local name=$1
  shift
  setsid "$@" >"$run_directory/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run_directory/pids/$name"
}

healthy() {  # name, URL, curl options...
  local name=$1 url=$2
  shift 2
  local pid
  pid=$(cat "$run_directory/pids/$name")
  kill -0 "$pid" 2>/dev/null || return 2
  [ "$(curl --silent --max-time 5 --cacert "$run_directory/pki/ca.crt" "$@" "$url" \
    2>/dev/null)" = ok ]
}

wait_healthy() {  # name, URL, curl options...
  local deadline=$((SECONDS + timeout_seconds)) status
  while true; do
    status=0
    healthy "$@" || status=$?
    [ $status -eq 0 ] && return 0
    if [ $status -eq 2 ] || [ $SECONDS -ge $deadline ]; then
      say "$1 $([ $status -eq 2 ] && echo exited || echo "is not healthy after $timeout_seconds s"); \
the end of its log:"
      tail -n 25 "$run_directory/logs/$1.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

up() {
  local with_node=false gitops=""
  while [ $# -gt 0 ]; do
    case $1 in
      --node) with_node=true; shift ;;
      --gitops) [ $# -ge 2 ] || fail "up: --gitops needs argocd, flux or both"
        gitops=$2; gitops_tools "$gitops" >/dev/null; shift 2 ;;
      *) fail "up: unknown option $1 (usage: $0 up [--node] [--gitops argocd|flux|both])" ;;
    esac
  done
  if $with_node; then
    node_preflight
  fi
  if [ -e "$run_directory/$marker" ]; then
    fail "a control plane already runs from $run_directory; run \`$0 down\` first \
(or set TFCOMPILE_CONTROL_PLANE_DIR for a second one)"
  fi
  # `down` removes the whole directory, so it must hold nothing but what `up` writes.
  if [ -e "$run_directory" ] && [ -n "$(ls -A "$run_directory")" ]; then
    fail "$run_directory is not empty; TFCOMPILE_CONTROL_PLANE_DIR must name a new or empty \
directory"
  fi
  for tool in openssl curl python3 setsid; do
    command -v "$tool" >/dev/null || fail "$tool is needed on PATH"
  done
  local build_options=()
  $with_node && build_options+=(--node)
  [ -n "$gitops" ] && build_options+=(--gitops "$gitops")
  build "${build_options[@]+"${build_options[@]}"}"
  local started=$SECONDS
  mkdir -p "$run_directory"/{logs,pids,etcd}
  touch "$run_directory/$marker"
  trap 'say "up failed; stopping what was started"; stop_all' EXIT
  chmod 700 "$run_directory"
  # With a node, the API server listens on the node's bridge, where the pods reach it (the
  # `kubernetes` Service's endpoint); otherwise on loopback only.
  api_address=127.0.0.1
  if $with_node; then
    node_network_up
    api_address=$node_address
  fi
  certificates
  local pki="$run_directory/pki" etcd_port etcd_peer_port controller_manager_port scheduler_port
  read -r etcd_port etcd_peer_port apiserver_port controller_manager_port scheduler_port \
    < <(free_ports 5)
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler

  start etcd "$(binary_of etcd)" \
    --name=tfcompile --data-dir="$run_directory/etcd" \
    --listen-client-urls="https://127.0.0.1:$etcd_port" \
    --advertise-client-urls="https://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="tfcompile=http://127.0.0.1:$etcd_peer_port" \
    --cert-file="$pki/etcd-server.crt" --key-file="$pki/etcd-server.key" \
    --trusted-ca-file="$pki/ca.crt" --client-cert-auth \
    --unsafe-no-fsync --log-level=warn
  wait_healthy etcd "https://127.0.0.1:$etcd_port/readyz" \
    --cert "$pki/apiserver-etcd-client.crt" --key "$pki/apiserver-etcd-client.key"

  start kube-apiserver "$(binary_of kube-apiserver)" \
    --bind-address="$api_address" --advertise-address="$api_address" \
    --secure-port="$apiserver_port" \
    --cert-dir="$run_directory/kube-apiserver" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --etcd-servers="https://127.0.0.1:$etcd_port" --etcd-cafile="$pki/ca.crt" \
    --etcd-certfile="$pki/apiserver-etcd-client.crt" \
    --etcd-keyfile="$pki/apiserver-etcd-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/service-account.pub" \
    --service-account-signing-key-file="$pki/service-account.key" \
    --service-cluster-ip-range="$service_cluster_ip_range" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction,PodSecurity \
    --allow-privileged=true --anonymous-auth=false --profiling=false \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP
  wait_healthy kube-apiserver "https://$api_address:$apiserver_port/readyz" \
    --cert "$pki/admin.crt" --key "$pki/admin.key"

  start kube-controller-manager "$(binary_of kube-controller-manager)" \
    --bind-address=127.0.0.1 --secure-port="$controller_manager_port" \
    --cert-dir="$run_directory/kube-controller-manager" \
    --kubeconfig="$run_directory/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$run_directory/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$run_directory/controller-manager.kubeconfig" \
    --service-account-private-key-file="$pki/service-account.key" \
    --root-ca-file="$pki/ca.crt" --use-service-account-credentials \
    --service-cluster-ip-range="$service_cluster_ip_range" \
    --leader-elect=false --profiling=false
  start kube-scheduler "$(binary_of kube-scheduler)" \
    --bind-address=127.0.0.1 --secure-port="$scheduler_port" \
    --cert-dir="$run_directory/kube-scheduler" \
    --kubeconfig="$run_directory/scheduler.kubeconfig" \
    --authentication-kubeconfig="$run_directory/scheduler.kubeconfig" \
    --authorization-kubeconfig="$run_directory/scheduler.kubeconfig" \
    --leader-elect=false --profiling=false
  # Their serving certificates are self-signed in --cert-dir: --insecure for the health check only.
  wait_healthy kube-controller-manager "https://127.0.0.1:$controller_manager_port/healthz" \
    --insecure
  wait_healthy kube-scheduler "https://127.0.0.1:$scheduler_port/healthz" --insecure
  if $with_node; then
    start_node
  fi
  local exports=""
  if [ -n "$gitops" ]; then
    exports=$(start_gitops "$gitops")
  fi
  say "up in $((SECONDS - started)) s: Kubernetes $(release) at https://$api_address:$apiserver_port \
(run \`$0 down\` to stop it)"
  trap - EXIT
  echo "export KUBECONFIG=$run_directory/admin.kubeconfig"
  if [ -n "$exports" ]; then
    echo "$exports"
  fi
}

# Stop what `up` started: only processes whose pid file is ours and whose command line names
# the run directory (a recycled pid of another program is left alone).
stop_all() {
  local pid_file pid name pids=()
  for name in argocd-application-controller argocd-applicationset-controller \
      argocd-repo-server redis kustomize-controller source-controller git-server kubelet \
      kube-proxy coredns \
      kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pid_file="$run_directory/pids/$name"
    [ -f "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" \
        | grep -qF -- "$run_directory"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  local deadline=$((SECONDS + 30))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  stop_node
  rm -rf "$run_directory"
}

down() {
  if [ ! -d "$run_directory" ]; then
    say "nothing runs from $run_directory"
    return 0
  fi
  [ -f "$run_directory/$marker" ] || fail "$run_directory was not made by $0 up; not removing it"
  stop_all
  say "stopped; removed $run_directory"
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  build) shift; build "$@" ;;
  # Where `build --gitops argocd|both` puts the kustomize Argo CD's repo-server runs.
  kustomize-binary) gitops_binary kustomize kustomize ;;
  kustomize-server-binary) gitops_binary kustomize tfcompile-kustomize ;;
  *) echo "usage: $0 up [--node] [--gitops argocd|flux|both] | down | build [--gitops \
argocd|flux|both] | kustomize-binary | kustomize-server-binary" >&2; exit 2 ;;
esac
