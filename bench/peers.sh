#!/usr/bin/env bash
# Measures sds-proxy side by side with nginx, haproxy and a bare
# httputil.ReverseProxy using the shared peer harness (../shared/bench/peers),
# then sds-proxy's degraded-answer rate against its proxied rate.
# Loopback only; every run is bounded (DURATION, ROUNDS). Needs root for
# apt-get (the harness installs nginx-light, haproxy, wrk).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
harness=${HARNESS:-$root/../shared/bench/peers}
out=${RESULTS:-/tmp/sds-peers-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

go build -trimpath -o "$out/sds-proxy" "$root/cmd/sds-proxy"
cmd="$out/sds-proxy run -config $here/sds-all-strategies.yaml -listen \$PROXY_ADDR -upstream http://\$UPSTREAM_ADDR"

echo "== proxied: every strategy on the point" >&2
PROXY_NAME=sds-proxy PROXY_ADDR=127.0.0.1:18090 PROXY_CMD="$cmd" RESULTS="$out/proxied" \
  "$harness/peers.sh" | tee "$out/proxied.md"

echo "== degraded: every request answered from the fallback, against proxied" >&2
for path in /degraded /; do
  name=sds-$( [ "$path" = / ] && echo proxied || echo degraded )
  PROXY_NAME=$name PROXY_ADDR=127.0.0.1:18090 PROXY_CMD="$cmd" REQ_PATH=$path TARGETS=$name MODES=conns \
    RESULTS="$out/$name" "$harness/peers.sh" | tee "$out/$name.md"
done
echo "results in $out" >&2
