#!/usr/bin/env bash
# Builds kubelet, kube-apiserver, kube-scheduler and kube-controller-manager
# of one Kubernetes version into the cache,
# from the k8s.io/kubernetes module (Go module proxy): a wrapper module that
# requires it and replaces each of its ./staging modules (absent from the
# module zip) with the published k8s.io/... v0.<minor>.<patch>.
# Usage: build-k8s.sh VERSION CACHE_DIR   (VERSION like v1.34.4)
# Prints nothing but errors; each binary is built once and kept.
set -euo pipefail
ver=${1:?version}; cache=${2:?cache dir}
staging=v0.${ver#v1.}
src=$cache/$ver/src bin=$cache/$ver/bin
mkdir -p "$src" "$bin"
cd "$src"
if [ ! -s go.sum ]; then
  mod=$(go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  [ -n "$mod" ] || { echo "build-k8s: k8s.io/kubernetes@$ver not downloadable" >&2; exit 1; }
  goline=$(grep -m1 '^go ' "$mod")
  {
    echo "module sdsproxy.local/k8sbuild"
    echo
    echo "$goline"
    echo
    echo "require k8s.io/kubernetes $ver"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 '"$staging"'#p' "$mod"
    echo ")"
  } > go.mod
fi
# tools.go names every component, so that go mod tidy keeps what each
# needs; a cache made before a component was added gets it here.
components="kubelet kube-apiserver kube-scheduler kube-controller-manager"
want_tools=$(
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in $components; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  printf ')\n'
)
if [ "$(cat tools.go 2>/dev/null)" != "$want_tools" ]; then
  printf '%s\n' "$want_tools" > tools.go
  go mod tidy
fi
minor=${ver#v1.}; minor=${minor%%.*}
ld="-s -w -X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
for c in $components; do
  if [ ! -x "$bin/$c" ]; then
    start=$(date +%s)
    CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$bin/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$bin/$c.tmp" "$bin/$c"
    echo "build-k8s: $c $ver built in $(( $(date +%s) - start )) s" >&2
  fi
done
