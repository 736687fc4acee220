#!/usr/bin/env bash
# A one-node Kubernetes on this machine, from parts it has: etcd,
# kube-apiserver (PodSecurity admission on), kube-scheduler,
# kube-controller-manager (so Deployments, ReplicaSets and EndpointSlices
# act), a kubelet on containerd + runc with a CNI bridge. No kube-proxy: the
# tests send traffic to pod addresses on the bridge, never to a ClusterIP.
# The apiserver listens on the bridge's own address (10.88.0.1), which the
# host and the pods reach alike (see docs/kubernetes.md).
#
#   deploy/cluster/cluster.sh check        can it run here? one line, exit 0 or 3
#   deploy/cluster/cluster.sh build        build (or find cached) the four Kubernetes binaries
#   deploy/cluster/cluster.sh up DIR       bring it up, all state in DIR
#   deploy/cluster/cluster.sh down DIR     stop what up started (by PID), remove the bridge
#   deploy/cluster/cluster.sh e2e          up in a temporary DIR, the end-to-end test, down
#
# Needs root, cgroups, and Debian's containerd, runc, containernetworking-plugins,
# etcd-server and kubectl. Binaries are cached in $SDS_CLUSTER_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/sds-proxy-cluster), keyed by version.
# Every wait is bounded; on a time-out it says which piece and where its log is.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
K8S_VERSION=${SDS_K8S_VERSION:-v1.34.4}
CACHE=${SDS_CLUSTER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/sds-proxy-cluster}
CNI_BIN=${SDS_CNI_BIN:-/usr/lib/cni}
NODE=localhost # the apiserver reaches the kubelet by this name (a node IP may not be loopback)
BRIDGE=sdse2e0
SUBNET=10.88.0.0/16
API_ADDR=10.88.0.1 # the bridge's own address: the host and the pods reach it
ETCD_PORT=32379 ETCD_PEER_PORT=32380 API_PORT=36443 KUBELET_PORT=30250 KUBELET_HEALTHZ_PORT=30248
PAUSE_IMAGE=sds-e2e.local/pause:1
# The kubelet's pod sync period: the kubelet rewrites a changed ConfigMap
# volume on the next sync, so this bounds the edit -> swap delay (default 1m).
SYNC=${SDS_CLUSTER_SYNC:-1m}

say() { echo "cluster: $*" >&2; }
up_dir=/nonexistent # the folder of the cluster being brought up (wait_for watches its processes)
die() { say "$*"; exit 1; }

# wait_for SECONDS WHAT LOG CMD...: run CMD until it succeeds, at most SECONDS.
wait_for() {
  local secs=$1 what=$2 log=$3; shift 3
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    local pid name
    while read -r pid name; do
      if ! kill -0 "$pid" 2>/dev/null; then
        say "$name exited while waiting for $what; last lines of $up_dir/logs/$name.log:"
        tail -n 15 "$up_dir/logs/$name.log" >&2 || true
        return 1
      fi
    done < <(cat "$up_dir/pids" 2>/dev/null)
    if [ "$(date +%s)" -ge "$deadline" ]; then
      say "$what not ready after ${secs}s; last lines of $log:"
      tail -n 15 "$log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

# check prints why this machine cannot run the cluster, in one line, and
# returns 3; or returns 0 silently.
check() {
  local missing=()
  [ "$(id -u)" = 0 ] || { echo "cannot run here: needs root (containerd, mounts, network namespaces)"; return 3; }
  for c in containerd containerd-shim-runc-v2 runc ctr etcd kubectl go openssl ip curl; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  for p in bridge host-local loopback; do
    [ -x "$CNI_BIN/$p" ] || missing+=("$CNI_BIN/$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "cannot run here: missing ${missing[*]} (Debian: containerd runc containernetworking-plugins etcd-server kubectl)"
    return 3
  fi
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    for c in cpu memory pids; do
      grep -qw "$c" /sys/fs/cgroup/cgroup.controllers || { echo "cannot run here: no $c cgroup controller"; return 3; }
    done
  else
    for c in cpu cpuacct cpuset memory pids; do
      [ -d "/sys/fs/cgroup/$c" ] || { echo "cannot run here: no $c cgroup controller mounted at /sys/fs/cgroup/$c"; return 3; }
    done
  fi
  for port in $ETCD_PORT $ETCD_PEER_PORT $API_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "cannot run here: 127.0.0.1:$port is in use (another cluster still up? cluster.sh down DIR)"; return 3
    fi
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    echo "cannot run here: bridge $BRIDGE exists (another cluster still up? cluster.sh down DIR)"; return 3
  fi
  if ip route | grep -q '^10\.88\.'; then
    echo "cannot run here: $SUBNET is routed already"; return 3
  fi
}

bins=$CACHE/$K8S_VERSION/bin

build() {
  if [ -x "$bins/kubelet" ] && [ -x "$bins/kube-apiserver" ] && [ -x "$bins/kube-scheduler" ] && [ -x "$bins/kube-controller-manager" ]; then return 0; fi
  say "building kubelet, kube-apiserver, kube-scheduler and kube-controller-manager $K8S_VERSION into $bins (several minutes, once; log: $CACHE/build-$K8S_VERSION.log)"
  mkdir -p "$CACHE"
  timeout 3600 "$here/build-k8s.sh" "$K8S_VERSION" "$CACHE" >"$CACHE/build-$K8S_VERSION.log" 2>&1 || {
    tail -n 20 "$CACHE/build-$K8S_VERSION.log" >&2; die "building Kubernetes $K8S_VERSION failed or took over an hour"; }
  grep '^build-k8s:' "$CACHE/build-$K8S_VERSION.log" >&2 || true
}

# images builds and caches the test images, keyed by the sources' hash:
# sds-proxy from the Dockerfile's final stage, the pause image and the
# test upstream.
images() {
  local out=$1
  mkdir -p "$out"
  local tool=$out/mkimage
  (cd "$repo/deploy" && go build -o "$tool" ./cluster/mkimage && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/pause" ./cluster/pause && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/upstream" ./cluster/upstream) || die "building the image tools failed"
  # The same build as the Dockerfile's build stage (its RUN line).
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=e2e" -o "$out/sds-proxy" ./cmd/sds-proxy) || die "building sds-proxy failed"
  "$tool" -o "$out/sds-proxy.tar" -tag sds-e2e.local/sds-proxy:e2e -dockerfile "$repo/Dockerfile" -context "$repo" -built "/out/sds-proxy=$out/sds-proxy"
  "$tool" -o "$out/pause.tar" -tag "$PAUSE_IMAGE" -bin "$out/pause" -user 65535:65535
  "$tool" -o "$out/upstream.tar" -tag sds-e2e.local/upstream:e2e -bin "$out/upstream" -user 65532:65532
}

pki() {
  local d=$1/pki
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=sds-e2e-ca" 2>/dev/null
    # apiserver serving certificate
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:'"$API_ADDR"',IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 2 -extfile apiserver.ext 2>/dev/null
    # the apiserver's client certificate to the kubelet (logs, port-forward)
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj "/CN=kube-apiserver-kubelet-client/O=system:masters" 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 2 2>/dev/null
    # service account token signing
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    admin=$(openssl rand -hex 16) kubelet=$(openssl rand -hex 16)
    printf '%s,admin,admin,system:masters\n%s,system:node:%s,kubelet,system:nodes\n' "$admin" "$kubelet" "$NODE" >tokens.csv
    echo "$admin" >admin.token
    echo "$kubelet" >kubelet.token
    chmod 600 ./*.key ./*.token tokens.csv
  )
}

kubeconfig() { # FILE USER TOKENFILE
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sds-e2e
  cluster: {server: "https://$API_ADDR:$API_PORT", certificate-authority: "$(dirname "$1")/pki/ca.crt"}
users:
- name: $2
  user: {token: "$(cat "$3")"}
contexts:
- name: sds-e2e
  context: {cluster: sds-e2e, user: $2}
current-context: sds-e2e
EOF
}

# start NAME DIR CMD...: runs CMD in the background, its output in
# DIR/logs/NAME.log, its PID in DIR/pids (down stops them in reverse).
start() {
  local name=$1 dir=$2; shift 2
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo "$! $name" >>"$dir/pids"
}

up() {
  local dir=$1
  local why
  why=$(check) || die "$why"
  build
  mkdir -p "$dir"/{logs,etcd,containerd,cni/net.d,cni/ipam,kubelet}
  dir=$(cd "$dir" && pwd)
  up_dir=$dir
  : >"$dir/pids"
  sysctl -n net.ipv4.ip_forward >"$dir/ip_forward.before"
  # What the kubelet makes outside DIR whatever its flags, to remove at down
  # if it was not there before.
  : >"$dir/made-outside"
  for p in /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /sys/fs/cgroup/memory/kubepods /sys/fs/cgroup/kubepods; do
    [ -e "$p" ] || echo "$p" >>"$dir/made-outside"
  done
  images "$CACHE/images"
  pki "$dir"
  kubeconfig "$dir/admin.kubeconfig" admin "$dir/pki/admin.token"
  kubeconfig "$dir/kubelet.kubeconfig" "system:node:$NODE" "$dir/pki/kubelet.token"

  # The bridge before the apiserver, which listens on its address; the CNI
  # plugin finds it made, with its gateway address, and uses it.
  ip link add "$BRIDGE" type bridge
  ip addr add "$API_ADDR/16" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  say "etcd $(etcd --version | head -n 1)"
  start etcd "$dir" etcd --name sds-e2e --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "sds-e2e=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" --log-outputs stderr
  wait_for 30 etcd "$dir/logs/etcd.log" curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

  start kube-apiserver "$dir" "$bins/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" --bind-address "$API_ADDR" --advertise-address "$API_ADDR" \
    --secure-port "$API_PORT" --cert-dir "$dir/pki" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" --token-auth-file "$dir/pki/tokens.csv" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction,PodSecurity \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/pki/sa.pub" \
    --service-account-signing-key-file "$dir/pki/sa.key" --service-cluster-ip-range 10.96.0.0/24 \
    --kubelet-client-certificate "$dir/pki/kubelet-client.crt" --kubelet-client-key "$dir/pki/kubelet-client.key" \
    --kubelet-preferred-address-types Hostname --enable-aggregator-routing=true --profiling=false --v 1
  wait_for 120 kube-apiserver "$dir/logs/kube-apiserver.log" \
    kubectl --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz

  # The controllers and the scheduler: Deployments, ReplicaSets,
  # EndpointSlices, service accounts and the kube-root-ca.crt of every
  # namespace. (--enable-aggregator-routing above makes the apiserver call
  # a webhook's Service at its endpoints' addresses, not its ClusterIP.)
  say "kube-controller-manager, kube-scheduler $("$bins/kube-scheduler" --version | awk '{print $2}')"
  start kube-controller-manager "$dir" "$bins/kube-controller-manager" --kubeconfig "$dir/admin.kubeconfig" \
    --leader-elect=false --secure-port 0 --use-service-account-credentials=false \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" --v 1
  start kube-scheduler "$dir" "$bins/kube-scheduler" --kubeconfig "$dir/admin.kubeconfig" \
    --leader-elect=false --secure-port 0 --v 1
  wait_for 60 kube-controller-manager "$dir/logs/kube-controller-manager.log" \
    kubectl --kubeconfig "$dir/admin.kubeconfig" -n default get serviceaccount default

  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  if ! sh -c 'echo -1 >/proc/self/oom_score_adj' 2>/dev/null; then
    say "root cannot lower an OOM score here (no CAP_SYS_RESOURCE): runc through $here/runc-oom.sh"
    cat >>"$dir/containerd/config.toml" <<EOF
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      BinaryName = "$here/runc-oom.sh"
EOF
  fi
  cat >"$dir/cni/net.d/10-sds-e2e.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "sds-e2e", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": false,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam", "ranges": [[{"subnet": "$SUBNET"}]]}}]}
EOF
  say "containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}')"
  start containerd "$dir" containerd --config "$dir/containerd/config.toml"
  local ctr=(ctr --address "$dir/containerd/containerd.sock" -n k8s.io)
  wait_for 30 containerd "$dir/logs/containerd.log" "${ctr[@]}" version
  for i in pause sds-proxy upstream; do
    timeout 60 "${ctr[@]}" images import "$CACHE/images/$i.tar" >/dev/null || die "ctr images import $i.tar failed"
  done

  cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$dir/pki/ca.crt"}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://$dir/containerd/containerd.sock"
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
syncFrequency: $SYNC
serializeImagePulls: false
rotateCertificates: false
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
podLogsDirectory: "$dir/logs/pods"
imageGCLowThresholdPercent: 99
EOF
  say "kubelet $("$bins/kubelet" --version)"
  start kubelet "$dir" "$bins/kubelet" --config "$dir/kubelet/config.yaml" \
    --kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
    --hostname-override "$NODE" --v 1
  wait_for 120 "the node" "$dir/logs/kubelet.log" \
    kubectl --kubeconfig "$dir/admin.kubeconfig" wait --for condition=Ready "node/$NODE" --timeout 2s
  say "up: kubectl --kubeconfig $dir/admin.kubeconfig"
}

down() {
  local dir=$1
  [ -f "$dir/pids" ] || { say "nothing started in $dir"; return 0; }
  up_dir=/nonexistent # stopping: a process that is gone is no news
  local ctr=(ctr --address "$dir/containerd/containerd.sock" -n k8s.io)
  local netns=() pid name
  if [ -S "$dir/containerd/containerd.sock" ]; then
    # The pods' network namespaces, to remove below if the kubelet could not.
    local id
    for id in $(timeout 10 "${ctr[@]}" containers ls -q 2>/dev/null); do
      netns+=($(timeout 10 "${ctr[@]}" containers info "$id" 2>/dev/null | grep -o '/var/run/netns/cni-[0-9a-f-]*' || true))
    done
    # The controllers first, or they would replace the pods deleted below.
    while read -r pid name; do
      case "$name" in kube-controller-manager|kube-scheduler) stop_pid "$pid" "$name" ;; esac
    done <"$dir/pids"
    # Pods deleted while the kubelet runs: it stops their sandboxes, and the
    # CNI plugin releases their addresses and veths.
    if [ -f "$dir/admin.kubeconfig" ]; then
      timeout 20 kubectl --kubeconfig "$dir/admin.kubeconfig" delete pods --all -A --force --grace-period 0 --wait=false >/dev/null 2>&1 || true
      wait_for 60 "pod teardown" "$dir/logs/kubelet.log" no_tasks "$dir" || true
    fi
  fi
  tac "$dir/pids" | while read -r pid name; do
    [ "$name" = containerd ] && [ -S "$dir/containerd/containerd.sock" ] && kill_tasks "$dir"
    stop_pid "$pid" "$name"
  done
  : >"$dir/pids"
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $dir/containerd/containerd.sock" || true); do
    stop_pid "$pid" shim
  done
  local n
  for n in "${netns[@]}"; do
    [ -e "$n" ] && { ip netns delete "$(basename "$n")" 2>/dev/null || umount -l "$n" 2>/dev/null; rm -f "$n"; }
  done
  # The kubelet's links to the containers' logs, libcni's cache of this
  # network's results, and whatever the kubelet made outside DIR.
  rm -rf /var/log/containers/*_sds-e2e_*.log /var/log/pods/sds-e2e_* /var/lib/cni/results/sds-e2e-* 2>/dev/null || true
  [ -f "$dir/made-outside" ] && while read -r p; do
    case "$p" in
      /sys/fs/cgroup/*) # empty cgroups, leaves first, in every hierarchy
        for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
          [ -d "$h" ] && { find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
        done ;;
      *) [ -e "$p" ] && { find "$p" -depth \( -type s -o -type f -name kubelet_internal_checkpoint \) -delete; find "$p" -depth -type d -empty -delete; } || true ;;
    esac
  done <"$dir/made-outside"
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link delete "$BRIDGE" || say "could not delete bridge $BRIDGE"
  fi
  if [ -f "$dir/ip_forward.before" ]; then
    sysctl -qw "net.ipv4.ip_forward=$(cat "$dir/ip_forward.before")"
  fi
  # The kubelet's and containerd's mounts under DIR (pod volumes, rootfs).
  { grep -o " $dir/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  say "down: $dir"
}

# no_tasks DIR: true when containerd in DIR runs no container.
no_tasks() {
  local out
  out=$(ctr --address "$1/containerd/containerd.sock" -n k8s.io tasks ls -q) || return 1
  [ -z "$out" ]
}

# kill_tasks DIR: SIGKILL every container left in DIR's containerd.
kill_tasks() {
  local ctr=(ctr --address "$1/containerd/containerd.sock" -n k8s.io) t
  for t in $(timeout 10 "${ctr[@]}" tasks ls -q 2>/dev/null); do
    timeout 10 "${ctr[@]}" tasks kill -s KILL "$t" >/dev/null 2>&1 || true
  done
}

# stop_pid PID NAME: SIGTERM, up to 15 s, then SIGKILL.
stop_pid() {
  local pid=$1 name=$2 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  say "$name ($pid) ignored SIGTERM for 15s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

e2e() {
  local why
  why=$(check) || { echo "$why"; return 3; }
  local dir
  dir=$(mktemp -d /tmp/sds-cluster.XXXXXX)
  # On any exit: stop everything, whatever fails on the way down.
  trap 'set +e; down "'"$dir"'"; [ -n "${SDS_CLUSTER_KEEP:-}" ] || rm -rf "'"$dir"'"' EXIT
  local t0
  t0=$(date +%s)
  up "$dir"
  say "up in $(( $(date +%s) - t0 ))s"
  (cd "$repo/deploy" && SDS_CLUSTER_DIR="$dir" SDS_CLUSTER_SYNC="$SYNC" go test -count=1 -v -timeout 20m \
    -run '^(TestCluster|TestInjectionWebhook|TestRolloutUnderLoad)$' ./cluster/)
  say "e2e passed in $(( $(date +%s) - t0 ))s with the cluster's bring-up"
  # Down now rather than on exit, so that the figures the tests wrote come
  # last.
  local figures
  figures=$(cat "$dir/figures" 2>/dev/null || true)
  trap - EXIT
  down "$dir"
  [ -n "${SDS_CLUSTER_KEEP:-}" ] || rm -rf "$dir"
  printf '%s\n' "$figures"
}

case "${1:-}" in
  check) check ;;
  build) build ;;
  images) images "$CACHE/images" ;;
  up) up "${2:?cluster.sh up DIR}" ;;
  down) down "${2:?cluster.sh down DIR}" ;;
  e2e) e2e ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
