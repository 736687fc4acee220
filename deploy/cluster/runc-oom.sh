#!/bin/sh
# runc, for a machine whose root lacks CAP_SYS_RESOURCE (this one, a
# Firecracker VM: CapEff has no bit 24). Such a root may raise a process's
# OOM score but not lower it, and the kubelet asks for -998 on every pod
# sandbox (and -997 for Guaranteed pods' containers): runc init then fails
# with "can't get final child's PID from pipe: EOF". cluster.sh uses this
# wrapper only there; it clamps negative oomScoreAdj in the OCI spec to 0
# and runs runc unchanged otherwise.
prev=""
for a in "$@"; do
  case "$prev" in
    --bundle|-b) [ -f "$a/config.json" ] && sed -i 's/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/' "$a/config.json" ;;
    --process|-p) [ -f "$a" ] && sed -i 's/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/' "$a" ;;
  esac
  prev=$a
done
exec runc "$@"
