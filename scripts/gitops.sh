# GitOps controllers for the local control plane, out of cluster: Flux (source-controller and
# kustomize-controller) and Argo CD (repo-server, application-controller,
# applicationset-controller, with Redis and the kustomize binary its repo-server runs), and a git
# server over smart HTTP for them to read from. Sourced by control-plane.sh, not run.
#
# Each tool is built from source by its small module in this folder (flux/, argo-cd/,
# kustomize/) into $TFCOMPILE_GITOPS_CACHE (default $XDG_CACHE_HOME/tfcompile/gitops), once per
# release and digest of the module's files. CRDs and settings are read at run time from the
# controllers' own modules in Go's module cache.

gitops_modules="$repository/scripts"

gitops_cache() {
  echo "${TFCOMPILE_GITOPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfcompile/gitops}"
}

# The release a tool's module builds: tool name, module directory, the module that names it.
gitops_tool_release() {
  case $1 in
    flux) go_module_version "$gitops_modules/flux" github.com/fluxcd/source-controller ;;
    argo-cd) go_module_version "$gitops_modules/argo-cd" github.com/argoproj/argo-cd/v3 ;;
    kustomize) go_module_version "$gitops_modules/kustomize" sigs.k8s.io/kustomize/kustomize/v5 ;;
  esac
}

# Where a tool's binaries are built: <cache>/<tool>-<release>-<digest>/bin.
gitops_tool_directory() {
  echo "$(gitops_cache)/$1-$(gitops_tool_release "$1")-$(go_module_digest "$gitops_modules/$1")"
}

gitops_binary() {  # tool, binary
  echo "$(gitops_tool_directory "$1")/bin/$2"
}

# The tools `--gitops` names: argocd, flux or both.
gitops_tools() {
  case $1 in
    flux) echo flux ;;
    argocd) echo argo-cd kustomize ;;
    both) echo flux argo-cd kustomize ;;
    *) fail "--gitops takes argocd, flux or both, not '$1'" ;;
  esac
}

build_gitops() {  # argocd | flux | both
  local tool
  for tool in $(gitops_tools "$1"); do
    case $tool in
      flux)
        GO_MODULE_ANNOUNCE="building Flux $(gitops_tool_release flux) from source (first time \
only; about 10 minutes of CPU, 1.9 GB of memory)" \
          go_module_build "$gitops_modules/flux" "$(gitops_tool_directory flux)" \
          source-controller=github.com/fluxcd/source-controller \
          kustomize-controller=github.com/fluxcd/kustomize-controller ;;
      argo-cd)
        GO_MODULE_ANNOUNCE="building Argo CD $(gitops_tool_release argo-cd) from source (first \
time only; about 11 minutes of CPU, 2.5 GB of memory)" \
          go_module_build "$gitops_modules/argo-cd" "$(gitops_tool_directory argo-cd)" \
          argocd=github.com/argoproj/argo-cd/v3/cmd ;;
      kustomize)
        GO_MODULE_ANNOUNCE="building kustomize $(gitops_tool_release kustomize) from source" \
          go_module_build "$gitops_modules/kustomize" "$(gitops_tool_directory kustomize)" \
          kustomize=sigs.k8s.io/kustomize/kustomize/v5 \
          tfcompile-kustomize=tfcompile.dev/kustomize/render ;;
    esac
  done
}

# The directory of a Go module in the module cache (downloaded if missing), for the CRDs and
# settings each tool ships: module directory of ours, module path.
gitops_module_source() {
  local toolchain version directory
  toolchain=$(go_module_toolchain "$gitops_modules/$1")
  version=$(go_module_version "$gitops_modules/$1" "$2")
  directory=$(cd "$gitops_modules/$1" && if [ -n "$toolchain" ]; then export GOTOOLCHAIN=$toolchain; fi \
    && go mod download -json "$2@$version" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("Dir", ""))')
  [ -d "$directory" ] || fail "cannot find $2@$version in Go's module cache"
  echo "$directory"
}

# Wait until URL answers over HTTP (any status), or fail with the end of NAME's log.
wait_answers() {  # name, URL
  local deadline=$((SECONDS + timeout_seconds)) pid
  pid=$(cat "$run_directory/pids/$1")
  until curl --silent --output /dev/null --max-time 5 "$2"; do
    if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      say "$1 does not answer at $2; the end of its log:"
      tail -n 25 "$run_directory/logs/$1.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

admin_kubectl() {
  kubectl --kubeconfig "$run_directory/admin.kubeconfig" "$@"
}

# The git server: bare repositories created under $run_directory/git as NAME.git are served at
# http://127.0.0.1:PORT/NAME.git (fetch and push).
start_git_server() {
  command -v git >/dev/null || fail "--gitops: git is needed on PATH (Debian/Ubuntu: apt-get \
install git)"
  git_port=$(free_ports 1)
  mkdir -p "$run_directory/git"
  start git-server python3 "$repository/scripts/git_http_server.py" \
    --root "$run_directory/git" --port "$git_port"
  wait_answers git-server "http://127.0.0.1:$git_port/"
}

# A binary is started through a link in the run directory, so that its command line names the
# directory and `down` can tell it from other programs.
link_binary() {  # tool, binary, name
  local binary
  binary=$(gitops_binary "$1" "$2")
  [ -x "$binary" ] || fail "$binary is missing; run \`$0 build --gitops ...\`"
  mkdir -p "$run_directory/bin"
  ln -sf "$binary" "$run_directory/bin/$3"
  echo "$run_directory/bin/$3"
}

# Flux's source-controller and kustomize-controller in namespace flux-system, with the CRDs of
# their own modules. source-controller serves artifacts to kustomize-controller over loopback.
start_flux() {
  local source kustomize storage_port ports
  source=$(gitops_module_source flux github.com/fluxcd/source-controller)
  kustomize=$(gitops_module_source flux github.com/fluxcd/kustomize-controller)
  admin_kubectl create namespace flux-system >/dev/null
  admin_kubectl apply --server-side --field-manager=tfcompile-control-plane \
    -f "$source/config/crd/bases" -f "$kustomize/config/crd/bases" >/dev/null
  admin_kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null
  read -r storage_port flux_source_metrics flux_source_health flux_kustomize_metrics \
    flux_kustomize_health < <(free_ports 5)
  mkdir -p "$run_directory/flux/storage"
  local flux_environment=(env "KUBECONFIG=$run_directory/admin.kubeconfig"
    RUNTIME_NAMESPACE=flux-system)
  start source-controller "${flux_environment[@]}" \
    "$(link_binary flux source-controller source-controller)" \
    --storage-path="$run_directory/flux/storage" \
    --storage-addr="127.0.0.1:$storage_port" --storage-adv-addr="127.0.0.1:$storage_port" \
    --metrics-addr="127.0.0.1:$flux_source_metrics" \
    --health-addr="127.0.0.1:$flux_source_health" \
    --enable-leader-election=false --log-level=info
  # Gang objects (PodGroups) are applied in a stage of their own, before the StatefulSets whose
  # pods join them (docs/gitops.md says how to give a cluster's kustomize-controller this flag).
  start kustomize-controller "${flux_environment[@]}" \
    "$(link_binary flux kustomize-controller kustomize-controller)" \
    --metrics-addr="127.0.0.1:$flux_kustomize_metrics" \
    --health-addr="127.0.0.1:$flux_kustomize_health" \
    --enable-leader-election=false --log-level=info \
    --custom-apply-stage-kinds=scheduling.volcano.sh/PodGroup,scheduling.x-k8s.io/PodGroup
  wait_healthy source-controller "http://127.0.0.1:$flux_source_health/readyz"
  wait_healthy kustomize-controller "http://127.0.0.1:$flux_kustomize_health/readyz"
}

# Argo CD's repo-server, application-controller and applicationset-controller in namespace
# argocd, with Redis, its CRDs and default settings from its module. The settings of the
# tests: applications are compared every 5 s, and the repo-server keeps a branch's head for
# 5 s (Argo CD's defaults: 120 s and 3 minutes); each resource's health (with the health
# check's message) is kept in the Application's status, as before Argo CD 3.
start_argo_cd() {
  command -v redis-server >/dev/null || fail "--gitops argocd: redis-server is needed \
(Debian/Ubuntu: apt-get install redis-server)"
  local source redis_port repo_port repo_metrics controller_metrics set_metrics set_probe \
    set_webhook file
  source=$(gitops_module_source argo-cd github.com/argoproj/argo-cd/v3)
  admin_kubectl create namespace argocd >/dev/null
  # The Application CRD is too big for client-side apply.
  admin_kubectl apply --server-side --field-manager=tfcompile-control-plane \
    -f "$source/manifests/crds/application-crd.yaml" \
    -f "$source/manifests/crds/applicationset-crd.yaml" \
    -f "$source/manifests/crds/appproject-crd.yaml" >/dev/null
  for file in "$source"/manifests/base/config/*.yaml; do
    [ "$(basename "$file")" = kustomization.yaml ] && continue
    admin_kubectl apply --server-side --field-manager=tfcompile-control-plane -n argocd \
      -f "$file" >/dev/null
  done
  admin_kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null
  # argocd-server makes its secret key (the webhook handlers need one) and the project
  # `default`; it does not run here.
  admin_kubectl -n argocd patch secret argocd-secret --type merge -p "{\"stringData\": \
{\"server.secretkey\": \"$(openssl rand -hex 32)\"}}" >/dev/null
  admin_kubectl apply --server-side --field-manager=tfcompile-control-plane -f - \
    >/dev/null <<'YAML'
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: argocd}
spec:
  sourceRepos: ['*']
  destinations: [{namespace: '*', server: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
YAML
  read -r redis_port repo_port repo_metrics controller_metrics set_metrics set_probe \
    set_webhook < <(free_ports 7)
  mkdir -p "$run_directory/argocd/redis" "$run_directory/argocd/tmp" "$run_directory/bin"
  cat >"$run_directory/argocd/redis.conf" <<CONF
bind 127.0.0.1
port $redis_port
dir $run_directory/argocd/redis
save ""
appendonly no
set-proc-title no
CONF
  start redis redis-server "$run_directory/argocd/redis.conf"
  # The repo-server runs git-verify-wrapper.sh for every commit (even without GPG), and the
  # kustomize Argo CD ships; both must be on its PATH.
  install -m 755 "$source/hack/git-verify-wrapper.sh" "$run_directory/bin/git-verify-wrapper.sh"
  ln -sf "$(gitops_binary kustomize kustomize)" "$run_directory/bin/kustomize"
  # The repo-server's git credential socket defaults to /tmp/reposerver-ask-pass.sock, shared
  # by every run on the machine and left behind: it lives in the run directory instead.
  local argo_environment=(env "KUBECONFIG=$run_directory/admin.kubeconfig"
    "PATH=$run_directory/bin:$PATH" "TMPDIR=$run_directory/argocd/tmp"
    "ARGOCD_ASK_PASS_SOCK=$run_directory/argocd/ask-pass.sock"
    ARGOCD_FAKE_IN_CLUSTER=true ARGOCD_GPG_ENABLED=false
    ARGOCD_APPLICATIONSET_CONTROLLER_REQUEUE_AFTER=5s)
  start argocd-repo-server "${argo_environment[@]}" ARGOCD_BINARY_NAME=argocd-repo-server \
    "$(link_binary argo-cd argocd argocd-repo-server)" \
    --port "$repo_port" --address 127.0.0.1 --metrics-port "$repo_metrics" \
    --metrics-address 127.0.0.1 --redis "127.0.0.1:$redis_port" \
    --revision-cache-expiration 5s --loglevel info
  start argocd-application-controller "${argo_environment[@]}" \
    ARGOCD_BINARY_NAME=argocd-application-controller \
    "$(link_binary argo-cd argocd argocd-application-controller)" \
    --namespace argocd --repo-server "127.0.0.1:$repo_port" \
    --redis "127.0.0.1:$redis_port" --metrics-port "$controller_metrics" \
    --app-resync 5 --app-resync-jitter 0 --persist-resource-health --loglevel info
  start argocd-applicationset-controller "${argo_environment[@]}" \
    ARGOCD_BINARY_NAME=argocd-applicationset-controller \
    "$(link_binary argo-cd argocd argocd-applicationset-controller)" \
    --namespace argocd --argocd-repo-server "127.0.0.1:$repo_port" \
    --metrics-addr "127.0.0.1:$set_metrics" \
    --probe-addr "127.0.0.1:$set_probe" --webhook-addr "127.0.0.1:$set_webhook" \
    --enable-leader-election=false --loglevel info
  wait_answers argocd-repo-server "http://127.0.0.1:$repo_metrics/metrics"
  wait_answers argocd-application-controller "http://127.0.0.1:$controller_metrics/metrics"
  wait_answers argocd-applicationset-controller "http://127.0.0.1:$set_probe/healthz"
}

start_gitops() {  # argocd | flux | both
  local tool
  start_git_server
  for tool in $(gitops_tools "$1"); do
    case $tool in
      flux) start_flux ;;
      argo-cd) start_argo_cd ;;
    esac
  done
  echo "export TFCOMPILE_GIT_ROOT=$run_directory/git"
  echo "export TFCOMPILE_GIT_URL=http://127.0.0.1:$git_port"
}
