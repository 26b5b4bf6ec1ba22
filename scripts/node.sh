# The real node of the local cluster (`control-plane.sh up --node`): a kubelet built from the
# same Kubernetes source as the control plane, Debian's containerd and runc, the CNI reference
# plugins (bridge, host-local, loopback), kube-proxy in iptables mode and CoreDNS as cluster DNS,
# each a process of this machine, as a node's system services are. Pods run in their images,
# which node-images.sh builds without a registry and this script imports into containerd under
# the names the jobs use. Claims bind to local PersistentVolumes this script creates (a pool of
# directories in the run directory), through a default StorageClass. Sourced by control-plane.sh.
#
# Addresses: the pods' network is $pod_subnet on the bridge $node_bridge, whose address
# $node_address is the host's side: the API server, the kubelet and CoreDNS listen there, so the
# pods reach them as they reach a node's address in a cluster. Only one node runs at a time on a
# machine: kube-proxy owns the host's KUBE-* iptables chains.

node_bridge=tfcompile0
pod_subnet=10.244.0.0/24
node_address=10.244.0.1
cluster_domain=cluster.local
claim_pool_size=${TFCOMPILE_NODE_CLAIMS:-96}

coredns_module="$repository/scripts/coredns"

coredns_binary() {
  echo "${TFCOMPILE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfcompile/control-plane}/coredns-$(
    go_module_version "$coredns_module" github.com/coredns/coredns)-$(go_module_digest "$coredns_module")/bin/coredns"
}

build_coredns() {
  local binary
  binary=$(coredns_binary)
  GO_MODULE_ANNOUNCE="building CoreDNS $(go_module_version "$coredns_module" \
github.com/coredns/coredns) from source (first time only; a few minutes)" \
    go_module_build "$coredns_module" "${binary%/bin/coredns}" coredns=./cmd/coredns
}

# What the node needs on this machine, each missing one named with the package that has it.
node_preflight() {
  [ "$(id -u)" -eq 0 ] || fail "up --node: a kubelet and a container runtime need root"
  local missing=() tool
  for tool in containerd:containerd containerd-shim-runc-v2:containerd runc:runc ctr:containerd \
      iptables:iptables ip:iproute2 conntrack:conntrack debootstrap:debootstrap gcc:gcc; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
  done
  for tool in bridge host-local loopback; do
    [ -x "/usr/lib/cni/$tool" ] || missing+=(containernetworking-plugins)
  done
  [ ${#missing[@]} -eq 0 ] || fail "up --node needs Debian's $(printf '%s\n' "${missing[@]}" \
    | sort -u | tr '\n' ' ')(apt-get install them; scripts/setup.sh does when run as root)"
  [ -d /sys/fs/cgroup ] || fail "up --node: no cgroup file system at /sys/fs/cgroup"
}

# The bridge the pods' veths join, made before the API server starts so it can listen there.
node_network_up() {
  if ip link show "$node_bridge" >/dev/null 2>&1; then
    fail "network device $node_bridge exists: another node runs on this machine (or a run \
left it: \`ip link delete $node_bridge\`)"
  fi
  ip link add "$node_bridge" type bridge
  echo "$node_bridge" >"$run_directory/node-bridge"
  ip addr add "$node_address/${pod_subnet#*/}" dev "$node_bridge"
  ip link set "$node_bridge" up
}

# A client certificate of the cluster's CA: name, subject.
node_certificate() {
  (
    cd "$run_directory/pki"
    umask 077
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -extfile <(printf '%s\n' basicConstraints=CA:FALSE \
        keyUsage=critical,digitalSignature,keyEncipherment extendedKeyUsage=clientAuth) \
      -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" ca.srl
  )
}

# An image name as the container runtime's CRI looks it up (docker.io/library/… for short names).
normalized_image() {
  local name=$1 first=${1%%/*}
  if [ "$name" = "$first" ]; then
    name="docker.io/library/$name"
  elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
    name="docker.io/$name"
  fi
  echo "$name"
}

containerd_socket() {
  echo "$run_directory/containerd/containerd.sock"
}

start_containerd() {
  local directory="$run_directory/containerd" pause
  mkdir -p "$directory" "$run_directory/cni/net.d"
  pause=$(awk -F '\t' '$1 ~ /\/pause:/ { print $1; exit }' "$run_directory/images")
  [ -n "$pause" ] || fail "node-images.sh gave no pause image"
  cat >"$directory/config.toml" <<EOF
version = 2
root = "$directory/root"
state = "$directory/state"
[grpc]
  address = "$(containerd_socket)"
[ttrpc]
  address = "$(containerd_socket).ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$directory/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(normalized_image "$pause")"
  # Root here may not lower an oom_score_adj (no CAP_SYS_RESOURCE): without this every
  # sandbox fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$run_directory/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$directory/runc"
EOF
  start containerd containerd --config "$directory/config.toml"
  local deadline=$((SECONDS + 60))
  until ctr -a "$(containerd_socket)" version >/dev/null 2>&1; do
    kill -0 "$(cat "$run_directory/pids/containerd")" 2>/dev/null && [ $SECONDS -lt $deadline ] \
      || { say "containerd did not start; the end of its log:"; \
           tail -n 25 "$run_directory/logs/containerd.log" >&2; exit 1; }
    sleep 0.2
  done
}

# Every image the examples and `init`'s job name, and the pause image: imported once per
# archive, then tagged with each further name that shares it.
import_images() {
  local name archive imported=() seen reference
  while IFS=$'\t' read -r name archive; do
    reference=$(normalized_image "$name")
    seen=""
    for entry in "${imported[@]+"${imported[@]}"}"; do
      [ "${entry#*$'\t'}" = "$archive" ] && seen=${entry%%$'\t'*}
    done
    if [ -n "$seen" ]; then
      ctr -a "$(containerd_socket)" -n k8s.io images tag "$seen" "$reference" >/dev/null
    else
      ctr -a "$(containerd_socket)" -n k8s.io images import --index-name "$reference" \
        "$archive" >/dev/null
      imported+=("$reference"$'\t'"$archive")
    fi
  done <"$run_directory/images"
}

write_cni_configuration() {
  cat >"$run_directory/cni/net.d/10-tfcompile.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "tfcompile",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$node_bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_subnet", "gateway": "$node_address"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$run_directory/cni/ipam"
      }
    }
  ]
}
EOF
}

start_kubelet() {
  local directory="$run_directory/kubelet" port healthz_port
  read -r port healthz_port < <(free_ports 2)
  mkdir -p "$directory" "$run_directory/pod-logs"
  cat >"$directory/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts cgroup v1 hierarchies; kubelets from 1.35 on refuse them unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$(containerd_socket)
failSwapOn: false
address: $node_address
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $run_directory/pki/ca.crt}
authorization: {mode: AlwaysAllow}
clusterDNS: [$node_address]
clusterDomain: $cluster_domain
resolvConf: ""
podLogsDir: $run_directory/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
maxPods: 110
# Pods see a changed ConfigMap within seconds (the default resync is a minute).
syncFrequency: 10s
EOF
  start kubelet "$(binary_of kubelet)" --config="$directory/config.yaml" \
    --kubeconfig="$run_directory/node.kubeconfig" --root-dir="$directory/root" \
    --cert-dir="$directory/pki" --hostname-override="$node_name" --node-ip="$node_address" \
    --v=1
}

start_kube_proxy() {
  local healthz_port metrics_port
  read -r healthz_port metrics_port < <(free_ports 2)
  cat >"$run_directory/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $run_directory/kube-proxy.kubeconfig}
hostnameOverride: $node_name
clusterCIDR: $pod_subnet
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$healthz_port
metricsBindAddress: 127.0.0.1:$metrics_port
oomScoreAdj: 0
conntrack: {maxPerCore: 0}
EOF
  start kube-proxy "$(binary_of kube-proxy)" --config="$run_directory/kube-proxy.yaml" --v=1
}

start_coredns() {
  cat >"$run_directory/Corefile" <<EOF
.:53 {
    bind $node_address
    errors
    ready 127.0.0.1:$(free_ports 1)
    kubernetes $cluster_domain in-addr.arpa ip6.arpa {
        kubeconfig $run_directory/coredns.kubeconfig tfcompile-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
}
EOF
  start coredns "$(coredns_binary)" -conf "$run_directory/Corefile"
}

# Rights of the node's own services (as kubeadm grants them), the default StorageClass, and the
# pool of local volumes the jobs' claims bind to.
node_objects() {
  local index volumes="$run_directory/volumes" objects
  objects=$(cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tfcompile-node-proxier}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:kube-proxy}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: tfcompile-coredns}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tfcompile-coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: tfcompile-coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: tfcompile-coredns}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: tfcompile-local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
reclaimPolicy: Retain
EOF
)
  # Open to every user, as the usual ReadWriteMany provisioners make their volumes (an NFS
  # share's directory, Azure Files' default mount permissions 0777): the kubelet applies a
  # pod's fsGroup to a local volume only at its first mount, and not when that mount is
  # read-only (a TensorBoard pod's), so a volume first mounted read-only would stay root's.
  for ((index = 0; index < claim_pool_size; index++)); do
    mkdir -p "$volumes/volume-$index"
    chmod 0777 "$volumes/volume-$index"
    objects+=$(cat <<EOF

---
apiVersion: v1
kind: PersistentVolume
metadata: {name: tfcompile-local-$index}
spec:
  capacity: {storage: 1Ti}
  accessModes: [ReadWriteOnce, ReadWriteMany, ReadOnlyMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: tfcompile-local
  local: {path: $volumes/volume-$index}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [$node_name]}
EOF
)
  done
  kubectl --kubeconfig "$run_directory/admin.kubeconfig" apply --server-side \
    --field-manager=tfcompile-control-plane -f - >/dev/null <<<"$objects"
}

# Paths outside the run directory that the kubelet and the CNI library write to whatever they
# are told (the kubelet's device-plugin socket, the CNI result cache), and the host's
# KUBE-/CNI- iptables chains: what exists before the node starts is noted, so `down` removes
# only what the node added.
# containerd 1.6 keeps its shims' sockets in /run/containerd/s whatever its state directory.
node_outside_paths=(/var/lib/kubelet/device-plugins /var/lib/kubelet /var/lib/cni/results
  /var/lib/cni /run/containerd/s /run/containerd)

iptables_chains() {  # the KUBE-/CNI- chains of every table, one "COMMAND TABLE CHAIN" a line
  local command table
  for command in iptables ip6tables; do
    command -v "$command" >/dev/null || continue
    for table in filter nat mangle; do
      "$command" -t "$table" -S 2>/dev/null | awk -v c="$command" -v t="$table" \
        '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ { print c, t, $2 }'
    done
  done
}

note_node_surroundings() {
  local path
  for path in "${node_outside_paths[@]}"; do
    [ -e "$path" ] && echo "$path"
  done >"$run_directory/preexisting-paths"
  iptables_chains >"$run_directory/preexisting-chains"
}

# Remove the chains the node added, and every rule that jumps to one of them.
remove_node_chains() {
  local command table chain rule
  [ -f "$run_directory/preexisting-chains" ] || return 0
  while read -r command table chain; do
    grep -qxF "$command $table $chain" "$run_directory/preexisting-chains" && continue
    while read -r rule; do
      # shellcheck disable=SC2086  # a rule as iptables -S prints it, split into its words
      eval "$command -t $table -D ${rule#-A }" 2>/dev/null || true
    done < <("$command" -t "$table" -S 2>/dev/null | grep -E "^-A .* -j $chain( |\$)")
    "$command" -t "$table" -F "$chain" 2>/dev/null || true
  done < <(iptables_chains)
  while read -r command table chain; do
    grep -qxF "$command $table $chain" "$run_directory/preexisting-chains" && continue
    "$command" -t "$table" -X "$chain" 2>/dev/null || true
  done < <(iptables_chains)
}

# The CNI results of the node's sandboxes, the kubelet's links in /var/log/containers to the
# logs of pods still there when the node stopped (they point into the run directory), and the
# outside paths it made.
remove_node_paths() {
  local sandbox path
  for sandbox in "$run_directory"/containerd/root/io.containerd.grpc.v1.cri/sandboxes/*/; do
    [ -d "$sandbox" ] || continue
    sandbox=$(basename "$sandbox")
    rm -f /var/lib/cni/results/*-"$sandbox"-*
  done
  if [ -d /var/log/containers ]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$run_directory/*" -delete 2>/dev/null \
      || true
  fi
  [ -f "$run_directory/preexisting-paths" ] || return 0
  for path in "${node_outside_paths[@]}"; do
    grep -qxF "$path" "$run_directory/preexisting-paths" && continue
    case $path in
      /var/lib/kubelet/device-plugins) rm -f "$path/kubelet.sock"; rmdir "$path" 2>/dev/null ;;
      *) rmdir "$path" 2>/dev/null ;;
    esac || true
  done
}

start_node() {
  local started=$SECONDS
  note_node_surroundings
  node_certificate node "/O=system:nodes/CN=system:node:$node_name"
  node_certificate kube-proxy "/CN=system:kube-proxy"
  node_certificate coredns "/CN=tfcompile-coredns"
  kubeconfig node node
  kubeconfig kube-proxy kube-proxy
  kubeconfig coredns coredns
  node_objects
  bash "$repository/scripts/node-images.sh" archives >"$run_directory/images"
  start_containerd
  import_images
  say "images imported in $((SECONDS - started)) s"
  write_cni_configuration
  start_coredns
  start_kube_proxy
  start_kubelet
  local deadline=$((SECONDS + timeout_seconds)) ready="" name
  while [ "$ready" != True ]; do
    for name in containerd kubelet kube-proxy coredns; do
      if ! kill -0 "$(cat "$run_directory/pids/$name")" 2>/dev/null; then
        say "$name exited; the end of its log:"
        tail -n 25 "$run_directory/logs/$name.log" >&2 || true
        exit 1
      fi
    done
    if [ $SECONDS -ge $deadline ]; then
      say "node $node_name is not Ready after $timeout_seconds s; the end of the kubelet's log:"
      tail -n 25 "$run_directory/logs/kubelet.log" >&2 || true
      exit 1
    fi
    sleep 0.5
    ready=$(kubectl --kubeconfig "$run_directory/admin.kubeconfig" get node "$node_name" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  done
  say "node $node_name is Ready in $((SECONDS - started)) s (containerd $(containerd --version \
    | awk '{ print $3 }'), kubelet $(release))"
}

# Every process of the node's pods: those in the kubelet's cgroups, in every v1 hierarchy.
pod_processes() {
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
    [ -d "$hierarchy" ] && find "$hierarchy" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}

# Stop the node after its services are stopped: kill what the pods still run, stop containerd
# and its shims, then remove mounts, cgroups, the bridge and kube-proxy's rules.
stop_node() {
  local pid mount_point deadline hierarchy
  # Only a run that made the node's bridge has a node (and then the only one on this machine).
  [ -f "$run_directory/node-bridge" ] || return 0
  # Each task deleted through containerd, so its shim exits and removes its socket.
  local socket task
  socket=$(containerd_socket)
  if [ -S "$socket" ] && ctr -a "$socket" version >/dev/null 2>&1; then
    for task in $(ctr -a "$socket" -n k8s.io tasks list --quiet 2>/dev/null); do
      ctr -a "$socket" -n k8s.io tasks delete --force "$task" >/dev/null 2>&1 || true
    done
  fi
  for pid in $(pod_processes); do kill -KILL "$pid" 2>/dev/null || true; done
  if [ -f "$run_directory/pids/containerd" ]; then
    pid=$(cat "$run_directory/pids/containerd")
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$run_directory"; then
      kill -TERM "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 15))
      while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  # The shims outlive containerd by design; theirs name its socket.
  for pid in $(pgrep -f "containerd-shim.*$run_directory" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in $(pod_processes); do kill -KILL "$pid" 2>/dev/null || true; done
  deadline=$((SECONDS + 10))
  while [ -n "$(pod_processes)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  # Mounts under the run directory, deepest first (lazily: a process may still hold one).
  while read -r mount_point; do
    umount -l "$mount_point" 2>/dev/null || true
  done < <(awk -v root="$run_directory/" 'index($5, root) == 1 { print $5 }' \
    /proc/self/mountinfo | sort -r)
  for hierarchy in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
    [ -d "$hierarchy" ] && find "$hierarchy" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  ip link delete "$node_bridge" 2>/dev/null || true
  remove_node_chains
  remove_node_paths
}
