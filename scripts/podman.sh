#!/usr/bin/env bash
# A podman of the project's own for `tfcompile run-local` on this machine: a private image store
# holding the images scripts/node-images.sh builds (no registry is needed), and a configuration
# this machine's podman can run with. The machine's own podman storage, networks and
# configuration are never touched.
#
#   eval "$(scripts/podman.sh environment)"   set CONTAINERS_CONF and CONTAINERS_STORAGE_CONF
#                                             for podman (and so run-local) in this shell
#   scripts/podman.sh load [IMAGE ...]        build the images missing from the image cache (all
#                                             run-local's tests use, or those named: tensorflow,
#                                             python, pypy; see node-images.sh) and load each
#                                             into the private store under its names
#   scripts/podman.sh remove                  delete the private store and configuration
#
# The configuration (containers.conf), from what this machine has:
# - runtime runc (Debian's, as the project's node uses): crun 1.8 refuses cgroup v1 hierarchies
#   mounted beside a v2 one ("cgroups in hybrid mode not supported");
# - cgroup manager cgroupfs and events in a file when systemd is not running;
# - default ulimits within this process's own hard limits: podman's defaults (1048576 open
#   files) cannot be set by a root without CAP_SYS_RESOURCE, and every container start fails;
# - networks (netavark) described in a directory of the store's own.
# A machine with systemd, cgroup v2 and podman's defaults needs none of it: run-local uses
# whatever podman is configured with.
#
# Environment: TFCOMPILE_PODMAN_HOME (default: $XDG_CACHE_HOME/tfcompile/podman) holds the store
# and configuration; the state podman keeps while running lives in /run/tfcompile-podman.
set -euo pipefail

repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${TFCOMPILE_PODMAN_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tfcompile/podman}
run_root=/run/tfcompile-podman

fail() { echo "podman.sh: $*" >&2; exit 1; }

write_configuration() {
  command -v podman >/dev/null || fail "podman is not installed (apt-get install podman)"
  mkdir -p "$home/storage" "$home/networks" "$run_root"
  local files processes manager=cgroupfs
  files=$(ulimit -Hn)
  processes=$(ulimit -Hu)
  [ "$processes" = unlimited ] && processes=32768
  [ "$processes" -gt 32768 ] && processes=32768
  [ -d /run/systemd/system ] && manager=systemd
  cat >"$home/containers.conf.new" <<EOF
# Written by scripts/podman.sh: podman for run-local on this machine.
[containers]
default_ulimits = ["nofile=$files:$files", "nproc=$processes:$processes"]

[engine]
runtime = "runc"
cgroup_manager = "$manager"
events_logger = "file"
events_logfile_path = "$run_root/events.log"

[network]
network_backend = "netavark"
network_config_dir = "$home/networks"
EOF
  mv "$home/containers.conf.new" "$home/containers.conf"
  cat >"$home/storage.conf.new" <<EOF
# Written by scripts/podman.sh: run-local's private image store.
[storage]
driver = "overlay"
graphroot = "$home/storage"
runroot = "$run_root/storage"
EOF
  mv "$home/storage.conf.new" "$home/storage.conf"
}

environment() {
  write_configuration
  printf 'export CONTAINERS_CONF=%q\nexport CONTAINERS_STORAGE_CONF=%q\n' \
    "$home/containers.conf" "$home/storage.conf"
}

# Each archive is loaded once: $home/loaded/<name> records the archive a name was loaded from
# (its file name holds the recipe's digest), so a rebuilt image is loaded again.
load() {
  write_configuration
  export CONTAINERS_CONF="$home/containers.conf" CONTAINERS_STORAGE_CONF="$home/storage.conf"
  mkdir -p "$home/loaded"
  local listing name archive record image
  [ $# -gt 0 ] || set -- tensorflow python
  listing=$(bash "$repository/scripts/node-images.sh" archives "$@")
  declare -A loaded_from=()
  while IFS=$'\t' read -r name archive; do
    record="$home/loaded/${name//\//_}"
    if [ -f "$record" ] && [ "$(cat "$record")" = "$archive" ] && podman image exists "$name"; then
      continue
    fi
    image=${loaded_from[$archive]:-}
    if [ -z "$image" ]; then
      echo "podman.sh: loading $archive" >&2
      image=$(podman load --quiet --input "$archive" | sed -n 's/^Loaded image: //p' | tail -n 1)
      [ -n "$image" ] || fail "podman load read no image from $archive"
      loaded_from[$archive]=$image
    fi
    podman tag "$image" "$name"
    echo "$archive" >"$record"
  done <<<"$listing"
  podman image prune --force >/dev/null
}

remove() {
  if [ -f "$home/storage.conf" ]; then
    CONTAINERS_CONF="$home/containers.conf" CONTAINERS_STORAGE_CONF="$home/storage.conf" \
      podman system reset --force >/dev/null 2>&1 || true
  fi
  rm -rf "$home" "$run_root"
}

case "${1:-}" in
  environment) environment ;;
  load) shift; load "$@" ;;
  remove) remove ;;
  *) fail "usage: scripts/podman.sh environment | load [IMAGE ...] | remove" ;;
esac
