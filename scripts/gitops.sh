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
        say "building Flux $(gitops_tool_release flux) from source if not built yet (first \
time only; about 12 minutes on two cores)"
        go_module_build "$gitops_modules/flux" "$(gitops_tool_directory flux)" \
          source-controller=github.com/fluxcd/source-controller \
          kustomize-controller=github.com/fluxcd/kustomize-controller ;;
      argo-cd)
        say "building Argo CD $(gitops_tool_release argo-cd) from source if not built yet \
(first time only; about 15 minutes on two cores)"
        go_module_build "$gitops_modules/argo-cd" "$(gitops_tool_directory argo-cd)" \
          argocd=github.com/argoproj/argo-cd/v3/cmd ;;
      kustomize)
        go_module_build "$gitops_modules/kustomize" "$(gitops_tool_directory kustomize)" \
          kustomize=sigs.k8s.io/kustomize/kustomize/v5 ;;
    esac
  done
}
