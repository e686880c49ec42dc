#!/usr/bin/env bash
# Make a Docker engine reachable, idempotently, and print the DOCKER_HOST to use.
# Usage: eval "$(scripts/docker-up.sh)"   (prints `export DOCKER_HOST=...`)
# 1. If a daemon already answers (DOCKER_HOST or the default socket), use it.
# 2. Else install docker.io when dockerd is missing (Debian), and start our own daemon
#    with all its state under one folder ($AGENTLOAD_DOCKER_DIR, default /var/tmp/agentload-docker),
#    no bridge, no iptables: sandboxes need no network.
set -euo pipefail
D="${AGENTLOAD_DOCKER_DIR:-/var/tmp/agentload-docker}"
log() { echo "docker-up: $*" >&2; }

answers() { timeout 10 docker ${1:+-H "$1"} info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1; then
  if [ -n "${DOCKER_HOST:-}" ] && answers "$DOCKER_HOST"; then echo "export DOCKER_HOST=$DOCKER_HOST"; exit 0; fi
  if [ -S "$D/docker.sock" ] && answers "unix://$D/docker.sock"; then echo "export DOCKER_HOST=unix://$D/docker.sock"; exit 0; fi
  if [ -S /var/run/docker.sock ] && answers "unix:///var/run/docker.sock"; then echo "export DOCKER_HOST=unix:///var/run/docker.sock"; exit 0; fi
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "no Docker daemon answers and dockerd cannot be installed here (needs root + apt-get)"; exit 1
  fi
  log "installing docker.io (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq docker.io >&2
fi

mkdir -p "$D"
# A daemon of ours that died leaves a pidfile and socket behind: clear them.
if [ -f "$D/docker.pid" ]; then
  pid=$(cat "$D/docker.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; sleep 2; fi
  rm -f "$D/docker.pid"
fi
rm -f "$D/docker.sock"
log "starting dockerd under $D"
setsid dockerd --storage-driver overlay2 --data-root "$D/root" --exec-root "$D/exec" \
  --pidfile "$D/docker.pid" -H "unix://$D/docker.sock" --bridge none --iptables=false \
  >"$D/dockerd.log" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if answers "unix://$D/docker.sock"; then echo "export DOCKER_HOST=unix://$D/docker.sock"; exit 0; fi
  sleep 1
done
log "dockerd did not answer within 60 s; last lines of $D/dockerd.log:"
tail -20 "$D/dockerd.log" >&2
exit 1
