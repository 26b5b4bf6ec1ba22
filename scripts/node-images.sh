#!/usr/bin/env bash
# The container images a real node runs, built on this machine from source, Debian's packages
# and PyPI (no registry is needed), each as an OCI archive for `ctr images import`.
#
#   scripts/node-images.sh build      build every image missing from the cache (progress on
#                                     standard error)
#   scripts/node-images.sh archives [IMAGE ...]   build what is missing (of every image, or of
#                                     those named: pause, tensorflow, python, pypy), then print
#                                     one line per image on standard output: NAME<TAB>ARCHIVE;
#                                     import each with
#           `ctr -a SOCKET -n k8s.io images import --index-name NAME ARCHIVE`
#   scripts/node-images.sh check      build what is missing, import every archive into a private
#                                     containerd and run each image, then stop it and remove
#                                     everything the check made
#
# The images (docs/test-images.md says what each stands in for and how it differs):
#   registry.k8s.io/pause:TAG       the pod sandbox: build/pause/linux/pause.c of the
#                                   k8s.io/kubernetes module the control plane builds, compiled
#                                   static as build/pause/Makefile does (TAG from that Makefile)
#   docker.io/tensorflow/tensorflow:2.15.0 and :2.15.0-gpu   one archive under both names:
#                                   Debian 12 (debootstrap minbase), Debian's Python 3.11 and pip,
#                                   `pip install tensorflow==2.15.0`; no CUDA
#   docker.io/library/python:3.11   the Debian base alone: Debian's Python 3.11, pip, `python`
#   localhost/tfcompile-test/pypy3:3.9   the base with Debian's PyPy 3.9 as `python` (the
#                                   launcher's test under PyPy; not a public image)
# The names are the ones the kubelet asks containerd for: containerd's CRI plugin reads
# `tensorflow/tensorflow:2.15.0` as `docker.io/tensorflow/tensorflow:2.15.0`.
#
# Building needs root (debootstrap, chroot, mounts), debootstrap, gcc with a static C library
# (libc6-dev), Go (to fetch the Kubernetes module) and python3. The check needs containerd and
# runc. On Debian: apt-get install debootstrap gcc libc6-dev containerd runc.
#
# Each archive is named after its image and a digest of its recipe (this script's functions
# that build it, the helper scripts/node_images.py, the versions), so a changed recipe builds
# again and an unchanged one is reused; an archive a new one replaces is removed.
#
# Environment:
#   TFCOMPILE_IMAGE_CACHE    where archives, the Debian base layer, the downloaded Debian
#                            packages and pip's cache are kept
#                            (default: $XDG_CACHE_HOME/tfcompile/images)
#   TFCOMPILE_DEBIAN_MIRROR  the Debian mirror for debootstrap (default: the one apt uses here,
#                            from /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list)
# pip in the image's chroot takes this machine's pip settings (index, find-links, certificate,
# trusted hosts, timeouts; `pip config list`) and its proxy variables.
set -euo pipefail

repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
module="$repository/scripts/control-plane"
helper="$repository/scripts/node_images.py"
cache=${TFCOMPILE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfcompile/images}
debian_suite=bookworm
# python-is-python3 is Debian's `python` link to python3.
debian_packages=python3,python3-pip,python-is-python3,ca-certificates
tensorflow_version=2.15.0
tensorflow_names=("docker.io/tensorflow/tensorflow:$tensorflow_version"
  "docker.io/tensorflow/tensorflow:$tensorflow_version-gpu")
python_name=docker.io/library/python:3.11
pypy_name=localhost/tfcompile-test/pypy3:3.9
default_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Inside a chroot during a build: the pip cache, copies of the host's pip files, a TMPDIR.
build_mount=/.tfcompile-build
work=""

say() { echo "node-images: $*" >&2; }
fail() { say "$*"; exit 1; }

# shellcheck source=go-modules.sh
source "$repository/scripts/go-modules.sh"

digest() { sha256sum | cut -c1-16; }

# An image name as a file name: registry.k8s.io/pause:3.10 -> registry.k8s.io_pause_3.10
file_stem() {
  local name=${1//\//_}
  echo "${name//:/_}"
}

kubernetes_version() {
  go_module_version "$module" k8s.io/kubernetes
}

# The recipes' digests: what decides an image's content, as far as this script knows it.
pause_digest() {
  { echo "pause from k8s.io/kubernetes $(kubernetes_version)"; declare -f build_pause
    cat "$helper"; } | digest
}
base_digest() {
  { echo "debootstrap minbase $debian_suite $debian_packages"; declare -f build_base
    cat "$helper"; } | digest
}
tensorflow_digest() {
  { base_digest; echo "tensorflow==$tensorflow_version"; declare -f build_tensorflow pip_install
  } | digest
}

require_root() {
  [ "$(id -u)" -eq 0 ] || fail "building $1 needs root (debootstrap, chroot and mounts): run \
as root"
}

require_tools() {  # what for, then TOOL=PACKAGE...
  local purpose=$1 entry missing=()
  shift
  for entry in "$@"; do
    command -v "${entry%%=*}" >/dev/null || missing+=("${entry#*=}")
  done
  [ ${#missing[@]} -eq 0 ] || fail "$purpose needs ${missing[*]}: apt-get install ${missing[*]}"
}

# The build's scratch directory, in the cache (same file system as the archives, so a finished
# archive is renamed into place); one build at a time (flock), so a scratch directory found
# there is a killed build's, removed (its mounts first).
start_work() {
  mkdir -p "$cache"
  exec 8>"$cache/.lock"
  flock 8
  local stale
  for stale in "$cache"/work.*; do
    if [ -d "$stale" ]; then
      unmount_under "$stale"
      rm -rf --one-file-system "$stale"
    fi
  done
  work=$(mktemp -d "$cache/work.XXXXXX")
  trap finish_work EXIT
}

# Unmount everything mounted under $1, deepest first; fail if something stays mounted, so that
# nothing is removed through a mount.
unmount_under() {
  local point
  while read -r point; do
    umount "$point" 2>/dev/null || umount --lazy "$point"
  done < <(awk -v under="$1/" 'index($5, under) == 1 { print $5 }' /proc/self/mountinfo \
    | sort -r)
  if awk -v under="$1/" 'index($5, under) == 1 { found = 1 } END { exit !found }' \
      /proc/self/mountinfo; then
    fail "could not unmount everything under $1; remove it by hand"
  fi
}

finish_work() {
  if [ -n "$work" ] && [ -d "$work" ]; then
    unmount_under "$work"
    rm -rf --one-file-system "$work"
  fi
  work=""
}

# The directory of the k8s.io/kubernetes module (the Go toolchain fetches it the first time).
kubernetes_source() {
  local toolchain json
  toolchain=$(go_module_toolchain "$module")
  # shellcheck disable=SC2031  # GOTOOLCHAIN is for go mod download only
  json=$(cd "$module" && if [ -n "$toolchain" ]; then export GOTOOLCHAIN=$toolchain; fi \
    && go mod download -json "k8s.io/kubernetes@$(kubernetes_version)") \
    || fail "could not fetch k8s.io/kubernetes $(kubernetes_version) with go mod download"
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])' <<<"$json"
}

# The pause program, compiled with build/pause/Makefile's CFLAGS (its TAG and, for the
# Makefile's git revision, the module version substituted), stripped, as /pause in one layer;
# the image's config is what build/pause/Dockerfile gives it.
build_pause() {  # source directory (build/pause), tag, archive
  local source=$1 tag=$2 archive=$3 cflags
  cflags=$(awk '$1 == "CFLAGS" && $2 == "=" { $1 = $2 = ""; print; exit }' "$source/Makefile")
  cflags=${cflags//\$(TAG)/$tag}
  cflags=${cflags//\$(REV)/$(kubernetes_version)}
  if [ -z "$cflags" ] || [[ $cflags == *"\$("* ]]; then
    fail "cannot read the C flags of $source/Makefile (got: '$cflags')"
  fi
  mkdir "$work/pause"
  # shellcheck disable=SC2086  # the flags are words
  gcc $cflags -o "$work/pause/pause" "$source/linux/pause.c" \
    || fail "gcc could not compile pause.c statically (a static C library comes with libc6-dev)"
  strip "$work/pause/pause"
  python3 "$helper" archive "$archive" --tree "$work/pause" --config "{
    \"Env\": [\"PATH=$default_path\"], \"Entrypoint\": [\"/pause\"], \"User\": \"65535:65535\",
    \"WorkingDir\": \"/\"}"
}

# Prints the pause image's name and archive, built if missing.
pause_image() {
  local digest archive source tag
  digest=$(pause_digest)
  archive=$(compgen -G "$cache/registry.k8s.io_pause_*-$digest.oci.tar" | head -n 1) || true
  if [ -z "$archive" ]; then
    require_root "the pause image"
    require_tools "Compiling the pause image" gcc=gcc strip=binutils python3=python3
    command -v go >/dev/null || fail "Go is needed to fetch the Kubernetes source of the pause \
image (Go $(awk '$1 == "go" { print $2 }' "$module/go.mod") or newer: https://go.dev/dl/)"
    source=$(kubernetes_source)/build/pause
    [ -f "$source/linux/pause.c" ] || fail "the k8s.io/kubernetes $(kubernetes_version) module \
has no build/pause/linux/pause.c"
    tag=$(awk '$1 == "TAG" && $2 == "?=" { print $3; exit }' "$source/Makefile")
    [ -n "$tag" ] || fail "no TAG in $source/Makefile"
    archive="$cache/$(file_stem "registry.k8s.io/pause:$tag")-$digest.oci.tar"
    start_work
    if [ ! -f "$archive" ]; then
      say "building registry.k8s.io/pause:$tag from k8s.io/kubernetes $(kubernetes_version)"
      local started=$SECONDS
      build_pause "$source" "$tag" "$archive"
      remove_replaced "$archive" "$cache/registry.k8s.io_pause_"
      say "built registry.k8s.io/pause:$tag in $((SECONDS - started)) s: $archive"
    fi
    finish_work
  fi
  local name=${archive##*/registry.k8s.io_pause_}
  printf 'registry.k8s.io/pause:%s\t%s\n' "${name%"-$digest.oci.tar"}" "$archive"
}

# Remove the archives that archive $1 replaces: those whose names start with $2 (the same
# image, another tag or recipe).
remove_replaced() {
  local other
  for other in "$2"*.oci.tar; do
    [ "$other" = "$1" ] || [ ! -f "$other" ] || rm -f "$other"
  done
}

# The proxy apt uses, for debootstrap (unless the environment names one).
apt_proxy() {
  local http_setting="" https_setting=""
  if command -v apt-config >/dev/null; then
    eval "$(apt-config shell http_setting Acquire::http::Proxy https_setting Acquire::https::Proxy)"
  fi
  if [ -n "$http_setting" ] && [ -z "${http_proxy:-}" ]; then
    export http_proxy=$http_setting
  fi
  if [ -n "$https_setting" ] && [ -z "${https_proxy:-}" ]; then
    export https_proxy=$https_setting
  fi
}

# Debian's minimal system with Python and pip, cleaned of what is this machine's or the
# build's, as a layer tar ( /dev, /proc and /sys empty: the runtime mounts them).
build_base() {  # layer tar
  local layer=$1 mirror root="$work/base"
  mirror=${TFCOMPILE_DEBIAN_MIRROR:-$(python3 "$helper" mirror "$debian_suite")} \
    || fail "set TFCOMPILE_DEBIAN_MIRROR to a Debian mirror's URL"
  apt_proxy
  mkdir -p "$cache/debs"
  say "debootstrap $debian_suite (minbase, $debian_packages) from $mirror; log: \
$work/debootstrap.log"
  if ! debootstrap --variant=minbase --include="$debian_packages" --cache-dir="$cache/debs" \
      "$debian_suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 25 "$work/debootstrap.log" >&2
    fail "debootstrap failed"
  fi
  unmount_under "$root"
  chroot "$root" apt-get clean
  # The mirror, name server and host name are this machine's; logs and lists are the build's.
  rm -f "$root"/etc/apt/sources.list "$root"/etc/resolv.conf "$root"/etc/hostname \
    "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
  rm -rf "$root"/var/lib/apt/lists/* "$root"/tmp/* "$root"/var/tmp/* "$root"/root/.cache
  find "$root/var/log" -type f -delete
  mkdir -p "${layer%/*}"
  python3 "$helper" layer "$root" "$layer" --empty dev --empty proc --empty sys
}

# Prints the base layer's path, built if missing (under start_work's lock).
base_layer() {
  local layer
  layer="$cache/base/debian-$debian_suite-$(base_digest).layer.tar"
  if [ ! -f "$layer" ]; then
    local started=$SECONDS
    build_base "$layer"
    local other
    for other in "$cache"/base/debian-"$debian_suite"-*.layer.tar; do
      [ "$other" = "$layer" ] || rm -f "$other"
    done
    say "built the Debian base layer in $((SECONDS - started)) s: $layer"
  fi
  echo "$layer"
}

# `pip install` in the chroot $1 (its /proc, /dev and the build mount mounted), with this
# machine's pip settings and proxies; the log goes to $2. The packages are first downloaded
# into a wheelhouse in the cache (pip skips the files it finds there), then installed from it
# alone: pip's own HTTP cache keeps nothing when the index's responses carry no caching
# headers.
pip_install() {  # root, log, requirement...
  local root=$1 log=$2 kind rest variable
  shift 2
  local environment=(PATH="$default_path" HOME=/root LANG=C.UTF-8 TMPDIR="$build_mount/tmp"
    PIP_CACHE_DIR="$build_mount/pip/cache" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
    PIP_NO_INPUT=1)
  for variable in http_proxy https_proxy no_proxy all_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
      ALL_PROXY; do
    if [ -n "${!variable:-}" ]; then environment+=("$variable=${!variable}"); fi
  done
  mkdir -p "$work/build/tmp" "$work/build/pip" "$cache/pip/wheels"
  mount --bind "$work/build" "$root$build_mount"
  mount --bind "$cache/pip" "$root$build_mount/pip"
  while read -r kind rest; do
    case $kind in
      env) environment+=("$rest") ;;
      bind) mount --bind "${rest%% *}" "$root${rest#* }" ;;
    esac
  done < <(python3 "$helper" pip-settings "$work/build" "$build_mount")
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
  local pip=(chroot "$root" /usr/bin/env -i "${environment[@]}" python3 -m pip)
  if ! "${pip[@]}" download --dest "$build_mount/pip/wheels" "$@" >"$log" 2>&1 \
      || ! "${pip[@]}" install --break-system-packages --root-user-action=ignore \
        --no-warn-script-location --no-index --find-links "$build_mount/pip/wheels" "$@" \
        >>"$log" 2>&1; then
    tail -n 25 "$log" >&2
    fail "pip install $* failed"
  fi
  unmount_under "$root"
}

# TensorFlow over the base layer: the base unpacked as an overlay's lower directory, pip
# installs into the merged tree, and the upper directory (what pip changed) is the second layer.
# The build's own files (resolv.conf, the build mount's directory) go in the lower directory
# only, so no layer holds them. The config is the public image's: root, bash, LANG=C.UTF-8.
build_tensorflow() {  # archive
  local archive=$1 base lower="$work/lower" upper="$work/upper" merged="$work/merged"
  base=$(base_layer)
  mkdir -p "$lower" "$upper" "$work/overlay" "$merged" "$work/build"
  tar --extract --file "$base" --directory "$lower" --numeric-owner --preserve-permissions
  if [ -f /etc/resolv.conf ]; then cp --dereference /etc/resolv.conf "$lower/etc/resolv.conf"; fi
  mkdir "$lower$build_mount"
  mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$upper,workdir=$work/overlay" "$merged"
  say "pip install tensorflow==$tensorflow_version (a few minutes; log: $work/pip.log)"
  pip_install "$merged" "$work/pip.log" "tensorflow==$tensorflow_version"
  umount "$merged"
  rm -rf "$upper/root/.cache" "$upper/tmp"/* "$upper/var/tmp"/*
  python3 "$helper" archive "$archive" --tar "$base" --overlay-upper "$upper" --config "{
    \"Env\": [\"PATH=$default_path\", \"LANG=C.UTF-8\", \"DEBIAN_FRONTEND=noninteractive\"],
    \"Cmd\": [\"bash\"], \"WorkingDir\": \"/\"}"
}

# Prints the TensorFlow image's names and archive (one archive for both), built if missing.
tensorflow_image() {
  local archive name
  archive="$cache/$(file_stem "${tensorflow_names[0]}")-$(tensorflow_digest).oci.tar"
  if [ ! -f "$archive" ]; then
    require_root "the TensorFlow image"
    require_tools "Building the TensorFlow image" debootstrap=debootstrap chroot=coreutils \
      mount=mount python3=python3
    local started=$SECONDS
    start_work
    if [ ! -f "$archive" ]; then
      say "building ${tensorflow_names[*]}"
      build_tensorflow "$archive"
      remove_replaced "$archive" "$cache/$(file_stem "${tensorflow_names[0]%:*}")_"
    fi
    finish_work
    say "${tensorflow_names[*]} built in $((SECONDS - started)) s (clean-up included): $archive"
  fi
  for name in "${tensorflow_names[@]}"; do
    printf '%s\t%s\n' "$name" "$archive"
  done
}

# Python alone on the Debian base: the stand-in for the public python:3.11 image (Debian 12
# with Python 3.11, pip and a `python` command), which the node's tests run stand-in programs
# and small jobs in.
python_digest() {
  { base_digest; echo "python $python_name"; declare -f build_python; } | digest
}

build_python() {  # archive
  local base
  base=$(base_layer)
  python3 "$helper" archive "$1" --tar "$base" --config "{
    \"Env\": [\"PATH=$default_path\", \"LANG=C.UTF-8\"], \"Cmd\": [\"python3\"],
    \"WorkingDir\": \"/\"}"
}

# Prints the Python image's name and archive, built if missing.
python_image() {
  local archive
  archive="$cache/$(file_stem "$python_name")-$(python_digest).oci.tar"
  if [ ! -f "$archive" ]; then
    require_root "the Python image"
    require_tools "Building the Python image" debootstrap=debootstrap chroot=coreutils \
      mount=mount python3=python3
    start_work
    if [ ! -f "$archive" ]; then
      say "building $python_name"
      build_python "$archive"
      remove_replaced "$archive" "$cache/$(file_stem "${python_name%:*}")_"
    fi
    finish_work
  fi
  printf '%s\t%s\n' "$python_name" "$archive"
}

# PyPy over the base layer: Debian's pypy3 (PyPy 7.3, Python 3.9), with `python` linked to it
# in /usr/local/bin. Not a public image: the node's tests run the launcher in it, to show it
# runs under PyPy as under CPython. Built as the TensorFlow image is (an overlay whose upper
# directory is the layer); the mirror, name server and package lists are the build's only.
pypy_digest() {
  { base_digest; echo "pypy $pypy_name"; declare -f build_pypy; } | digest
}

build_pypy() {  # archive
  local archive=$1 base lower="$work/lower" upper="$work/upper" merged="$work/merged" mirror
  base=$(base_layer)
  mirror=${TFCOMPILE_DEBIAN_MIRROR:-$(python3 "$helper" mirror "$debian_suite")} \
    || fail "set TFCOMPILE_DEBIAN_MIRROR to a Debian mirror's URL"
  apt_proxy
  mkdir -p "$lower" "$upper" "$work/overlay" "$merged" "$cache/debs"
  tar --extract --file "$base" --directory "$lower" --numeric-owner --preserve-permissions
  if [ -f /etc/resolv.conf ]; then cp --dereference /etc/resolv.conf "$lower/etc/resolv.conf"; fi
  echo "deb $mirror $debian_suite main" >"$lower/etc/apt/sources.list"
  mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$upper,workdir=$work/overlay" "$merged"
  mount -t proc proc "$merged/proc"
  mount --bind /dev "$merged/dev"
  mount --bind "$cache/debs" "$merged/var/cache/apt/archives"
  local apt=(chroot "$merged" /usr/bin/env -i PATH="$default_path" LANG=C.UTF-8
    DEBIAN_FRONTEND=noninteractive ${http_proxy:+http_proxy=$http_proxy})
  say "apt-get install pypy3 (log: $work/apt.log)"
  if ! { "${apt[@]}" apt-get update && "${apt[@]}" apt-get install -y --no-install-recommends \
      pypy3; } >"$work/apt.log" 2>&1; then
    tail -n 25 "$work/apt.log" >&2
    fail "apt-get install pypy3 failed"
  fi
  unmount_under "$merged"
  mkdir -p "$upper/usr/local/bin"
  ln -s /usr/bin/pypy3 "$upper/usr/local/bin/python"
  rm -rf "$upper/var/lib/apt/lists" "$upper/var/cache/apt" "$upper/var/log" "$upper/tmp"/* \
    "$upper/var/cache/debconf"/*-old "$upper/var/lib/dpkg"/*-old
  python3 "$helper" archive "$archive" --tar "$base" --overlay-upper "$upper" --config "{
    \"Env\": [\"PATH=$default_path\", \"LANG=C.UTF-8\"], \"Cmd\": [\"pypy3\"],
    \"WorkingDir\": \"/\"}"
}

# Prints the PyPy image's name and archive, built if missing.
pypy_image() {
  local archive
  archive="$cache/$(file_stem "$pypy_name")-$(pypy_digest).oci.tar"
  if [ ! -f "$archive" ]; then
    require_root "the PyPy image"
    require_tools "Building the PyPy image" debootstrap=debootstrap chroot=coreutils \
      mount=mount python3=python3
    local started=$SECONDS
    start_work
    if [ ! -f "$archive" ]; then
      say "building $pypy_name"
      build_pypy "$archive"
      remove_replaced "$archive" "$cache/$(file_stem "${pypy_name%:*}")_"
    fi
    finish_work
    say "$pypy_name built in $((SECONDS - started)) s: $archive"
  fi
  printf '%s\t%s\n' "$pypy_name" "$archive"
}

# archives [IMAGE ...]: every image, or those named (pause, tensorflow, python, pypy).
archives() {
  local wanted=("$@") image
  [ ${#wanted[@]} -gt 0 ] || wanted=(pause tensorflow python pypy)
  for image in "${wanted[@]}"; do
    case $image in
      pause|tensorflow|python|pypy) "${image}_image" ;;
      *) fail "no image $image (pause, tensorflow, python, pypy)" ;;
    esac
  done
}

# A private containerd (its own root, state, socket, runc root and CNI directory under a
# temporary directory), each archive imported and run, then all of it removed.
check() {
  [ "$(id -u)" -eq 0 ] || fail "check: containerd needs root"
  require_tools "The check" containerd=containerd ctr=containerd runc=runc
  local listing
  listing=$(archives)
  local run_existed=true
  [ -e /run/containerd ] || run_existed=false
  work=$(mktemp -d "${TMPDIR:-/tmp}/tfcompile-node-images.XXXXXX")
  local socket="$work/containerd.sock" containerd_pid
  cat >"$work/config.toml" <<EOF
version = 2
root = "$work/root"
state = "$work/state"
[grpc]
  address = "$socket"
[plugins."io.containerd.internal.v1.opt"]
  path = "$work/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "$work/cni"
EOF
  containerd --config "$work/config.toml" >"$work/containerd.log" 2>&1 &
  containerd_pid=$!
  # shellcheck disable=SC2064  # the values now: the locals are gone when the trap runs
  trap "stop_check $containerd_pid $run_existed" EXIT
  local deadline=$((SECONDS + 30))
  until ctr -a "$socket" version >/dev/null 2>&1; do
    if ! kill -0 "$containerd_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      tail -n 25 "$work/containerd.log" >&2
      fail "containerd did not start"
    fi
    sleep 0.2
  done
  local ctr=(ctr -a "$socket" -n k8s.io) name archive started
  while IFS=$'\t' read -r name archive; do
    started=$(date +%s.%N)
    "${ctr[@]}" images import --index-name "$name" "$archive" >/dev/null
    say "imported $name ($(du -h "$archive" | cut -f1) archive) in \
$(elapsed "$started") s"
  done <<<"$listing"
  # The CRI plugin labels what it manages: the kubelet sees these images.
  "${ctr[@]}" images ls | awk 'NR == 1 || $1 !~ /^sha256:/' >&2
  local output pause_name program
  # ctr 1.6 has no --user: setpriv (util-linux, in the image) drops to uid/gid 1000. Keras 2.15
  # keeps __version__ on the `keras` module only (tf.keras.__version__ raises AttributeError);
  # tf.keras being Keras 2 shows in its module name.
  program='import keras, tensorflow as tf
print(tf.__version__, keras.__version__, tf.keras.__name__)
dense = tf.keras.layers.Dense(2, kernel_initializer="ones")
print(int(tf.reduce_sum(dense(tf.matmul(tf.ones([2, 3]), tf.ones([3, 2]))))))'
  for name in "${tensorflow_names[@]}"; do
    started=$(date +%s.%N)
    output=$("${ctr[@]}" run --rm --runc-root "$work/runc" --fifo-dir "$work/fifo" \
      --env TF_CPP_MIN_LOG_LEVEL=2 "$name" check-tensorflow \
      setpriv --reuid 1000 --regid 1000 --clear-groups python -c "$program" \
      2>"$work/tensorflow.log") || true
    [ "$output" = $'2.15.0 2.15.0 keras.api._v2.keras\n24' ] \
      || fail "$name printed: $output $(tail -n 20 "$work/tensorflow.log")"
    say "$name as uid 1000: TensorFlow 2.15.0 with Keras 2.15.0 as tf.keras; a matmul and a \
Dense layer computed ($(elapsed "$started") s)"
  done
  pause_name=$(awk -F '\t' '$1 ~ /^registry.k8s.io\/pause:/ { print $1 }' <<<"$listing")
  check_pause "$pause_name" SIGTERM 0
  check_pause "$pause_name" SIGKILL 137
}

elapsed() {
  python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"
}

# The pause container starts (as 65535), and signal $2 stops it with exit status $3.
check_pause() {
  local name=$1 signal=$2 expected=$3 id="check-pause-${2,,}" status=0 deadline
  "${ctr[@]}" run --rm --runc-root "$work/runc" --fifo-dir "$work/fifo" "$name" "$id" \
    >"$work/$id.log" 2>&1 &
  local pid=$!
  deadline=$((SECONDS + 30))
  until "${ctr[@]}" tasks ls 2>/dev/null | awk -v id="$id" '$1 == id && $3 == "RUNNING" \
      { found = 1 } END { exit !found }'; do
    [ $SECONDS -lt $deadline ] || fail "$name did not start: $(cat "$work/$id.log")"
    sleep 0.2
  done
  local user
  user=$(awk '$1 == "Uid:" { print $2 }' \
    "/proc/$("${ctr[@]}" tasks ls | awk -v id="$id" '$1 == id { print $2 }')/status")
  "${ctr[@]}" tasks kill --signal "$signal" "$id"
  wait "$pid" || status=$?
  [ "$status" -eq "$expected" ] || fail "$name after $signal exited $status, not $expected: \
$(cat "$work/$id.log")"
  say "$name ran as uid $user and stopped on $signal (exit status $status) \
$(tr '\n' ' ' <"$work/$id.log")"
}

stop_check() {  # containerd's pid, whether /run/containerd was there before
  local id
  if [ -n "$work" ] && [ -S "$work/containerd.sock" ]; then
    for id in $(ctr -a "$work/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$work/containerd.sock" -n k8s.io tasks kill --signal SIGKILL "$id" || true
      sleep 0.5
      ctr -a "$work/containerd.sock" -n k8s.io tasks delete "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr -a "$work/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr -a "$work/containerd.sock" -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  kill -TERM "$1" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  finish_work
  # The shims' sockets go under /run/containerd whatever the configuration says.
  if ! "$2" && [ -d /run/containerd ]; then
    find /run/containerd -depth -type d -empty -delete
  fi
}

case ${1:-} in
  build) archives >/dev/null ;;
  archives) shift; archives "$@" ;;
  check) check ;;
  *) echo "usage: $0 build | archives [pause|tensorflow|python|pypy ...] | check" >&2; exit 2 ;;
esac
