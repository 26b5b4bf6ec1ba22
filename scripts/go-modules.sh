# Building programs from source with the small Go modules in this folder (control-plane/,
# flux/, argo-cd/, kustomize/), each once per digest of its own files, into a cache directory.
# Sourced by control-plane.sh, not run. Each module commits only its go.mod, go.sum and, where
# a program has to be wrapped, a tiny main.go; the Go toolchain fetches the rest into its module
# cache. Callers define `say` and `fail`.

# The version of module $2 that module directory $1 requires (its go.mod's require line).
go_module_version() {
  awk -v wanted="$2" '$1 == "require" && $2 == wanted { print $3; exit }
    $1 == wanted && $2 ~ /^v/ { print $2; exit }' "$1/go.mod"
}

# The Go toolchain a module names on its `toolchain` line (e.g. go1.27.4), else nothing: the Go
# on PATH builds it.
go_module_toolchain() {
  awk '$1 == "toolchain" { print $2; exit }' "$1/go.mod"
}

# A digest of what decides a module's build: go.mod, go.sum and its .go files, in that order.
go_module_digest() {
  (
    cd "$1"
    local sources=()
    mapfile -t sources < <(find . -name '*.go' -type f | LC_ALL=C sort)
    cat go.mod go.sum "${sources[@]}" | sha256sum | cut -c1-12
  )
}

# go_module_build MODULE TARGET NAME=PACKAGE... — build each PACKAGE of MODULE (a directory) into
# TARGET/bin/NAME unless it is there. One build at a time per TARGET (flock); a second caller
# waits, then finds the binaries. GO_MODULE_ANNOUNCE is said before a build starts, `go build`'s
# -ldflags come from GO_MODULE_LDFLAGS; a module's
# `toolchain` line is honoured by asking for that toolchain (Go downloads it from the module
# proxy the first time).
go_module_build() {
  local module=$1 target=$2 entry
  shift 2
  local wanted=()
  for entry in "$@"; do
    [ -x "$target/bin/${entry%%=*}" ] || wanted+=("$entry")
  done
  [ ${#wanted[@]} -eq 0 ] && return 0
  local toolchain
  toolchain=$(go_module_toolchain "$module")
  command -v go >/dev/null || fail "Go is needed to build ${wanted[*]%%=*} from source (Go $(
    awk '$1 == "go" { print $2 }' "$module/go.mod") or newer: https://go.dev/dl/)"
  mkdir -p "$target"
  exec 9>"$target/.lock"
  flock 9
  local packages=()
  for entry in "${wanted[@]}"; do
    [ -x "$target/bin/${entry%%=*}" ] || packages+=("$entry")
  done
  if [ ${#packages[@]} -gt 0 ]; then
    if [ -n "${GO_MODULE_ANNOUNCE:-}" ]; then
      say "$GO_MODULE_ANNOUNCE"
    fi
    rm -rf "$target/bin.partial"
    mkdir -p "$target/bin.partial" "$target/bin"
    local started=$SECONDS name package
    for entry in "${packages[@]}"; do
      name=${entry%%=*}
      package=${entry#*=}
      (cd "$module" && if [ -n "$toolchain" ]; then export GOTOOLCHAIN=$toolchain; fi \
        && GOFLAGS=-mod=readonly nice go build -trimpath -ldflags="${GO_MODULE_LDFLAGS:--s -w}" -o "$target/bin.partial/$name" \
        "$package")
    done
    mv "$target/bin.partial/"* "$target/bin/"
    rmdir "$target/bin.partial"
    say "built in $((SECONDS - started)) s into $target/bin"
  fi
  exec 9>&-
}
