#!/usr/bin/env bash
# scripts/soak.sh MINUTES: starts the real server (tiny model, exact response cache with a
# SQLite file, an API key, an admin token) on a free port, runs `edgelm soak` against it for
# MINUTES (mixed load, deliberate cancellations, /reload alternating between two models, RSS
# sampled from /proc), stops the server with SIGTERM and checks that it exited cleanly.
# Exit status: the soak's (1: a failed request or RSS growth), else 1 if the server did not
# stop cleanly; 2: usage or setup problems. Needs only bash and a built edgelm
# (build/release/src/tools/edgelm, or $EDGELM_BIN).
#
# Environment: EDGELM_BIN, EDGELM_SHARED_DIR (default ../shared), SOAK_CONCURRENCY (8),
# SOAK_THREADS (server threads, 2), SOAK_ARGS (more `edgelm soak` flags, e.g.
# "--rss-growth-limit 32").
set -euo pipefail

usage() {
  echo "usage: $0 MINUTES   (a positive number, e.g. 2 or 0.5)" >&2
  exit 2
}
[ $# -eq 1 ] || usage
minutes=$1
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || usage

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${EDGELM_BIN:-$root/build/release/src/tools/edgelm}
shared=${EDGELM_SHARED_DIR:-$root/../shared}
models=$shared/models
if [ ! -x "$bin" ]; then
  echo "soak: $bin is not built (cmake --build --preset release --target edgelm, or make soak)" >&2
  exit 2
fi
for f in stories260K.bin tok512.bin aidreams260K.bin aidreams-tok512.bin; do
  [ -r "$models/$f" ] || { echo "soak: $models/$f is missing (EDGELM_SHARED_DIR)" >&2; exit 2; }
done
models=$(cd "$models" && pwd)

whole=${minutes%%.*}
frac=
[[ $minutes == *.* ]] && frac=${minutes#*.}
frac=${frac}000
seconds=$((10#$whole * 60 + 10#${frac:0:3} * 60 / 1000))
[ "$seconds" -ge 1 ] || seconds=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgelm-soak.XXXXXX")
log=$tmp/server.log
api_key=soak-key-$RANDOM$RANDOM
admin_token=soak-admin-$RANDOM$RANDOM
server_pid=

# Running, not exited-and-unreaped (kill -0 succeeds on a zombie).
alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  read -r _ _ state _ <"/proc/$1/stat" || return 1
  [ "$state" != Z ]
}

# shellcheck disable=SC2317  # called by the trap
cleanup() {
  if [ -n "$server_pid" ] && alive "$server_pid"; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

show_log() {
  echo "soak: --- server log (last 40 lines) ---" >&2
  tail -n 40 "$log" >&2 || true
}

# A small KV pool and queue: the pool's pages are all touched during the warm-up (so RSS can be
# flat after it) and the queue limit is reached under the soak's load (deliberate 429s).
"$bin" serve -m "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --host 127.0.0.1 --port 0 \
  --threads "${SOAK_THREADS:-2}" --kv-memory 4M --max-queue 4 --drain-timeout 20 \
  --cache exact --cache-db "$tmp/cache.db" --api-key "$api_key" --admin-token "$admin_token" >"$log" 2>&1 &
server_pid=$!

# --port 0: the server prints the port it bound.
port=
for _ in $(seq 1 100); do
  port=$(sed -n 's|.*listening on http://[^:]*:\([0-9][0-9]*\).*|\1|p' "$log" | head -n 1)
  [ -n "$port" ] && break
  alive "$server_pid" || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "soak: the server did not start listening" >&2
  show_log
  exit 2
fi

# GET /health over bash's /dev/tcp until it answers 200 (the model loads after the listener).
health_status() {
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
  IFS=' ' read -r -t 5 _ line _ <&3 || true
  exec 3<&- 3>&-
  echo "${line:-000}"
}
ready=
for _ in $(seq 1 300); do
  if [ "$(health_status 2>/dev/null)" = 200 ]; then ready=1; break; fi
  alive "$server_pid" || break
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "soak: the server at port $port did not become healthy" >&2
  show_log
  exit 2
fi
echo "soak: server pid $server_pid on http://127.0.0.1:$port; ${seconds} s of load"

soak_rc=0
# shellcheck disable=SC2086  # SOAK_ARGS is a list of flags
"$bin" soak --url "http://127.0.0.1:$port" --duration "$seconds" --pid "$server_pid" \
  --concurrency "${SOAK_CONCURRENCY:-8}" --api-key "$api_key" --admin-token "$admin_token" \
  --reload "$models/aidreams260K.bin,tokenizer=$models/aidreams-tok512.bin" \
  --reload "$models/stories260K.bin,tokenizer=$models/tok512.bin" ${SOAK_ARGS:-} || soak_rc=$?

kill -TERM "$server_pid"
# The drain timeout is 20 s; a server still running 30 s after SIGTERM fails.
for _ in $(seq 1 300); do
  alive "$server_pid" || break
  sleep 0.1
done
if alive "$server_pid"; then
  echo "soak: FAIL: the server did not exit within 30 s of SIGTERM" >&2
  show_log
  exit 1
fi
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=
if [ "$server_rc" -ne 0 ] || ! grep -q 'edgelm serve: stopped' "$log"; then
  echo "soak: FAIL: the server exited with status $server_rc after SIGTERM" >&2
  show_log
  exit 1
fi
echo "soak: server stopped cleanly after SIGTERM"
if [ "$soak_rc" -ne 0 ]; then show_log; fi
exit "$soak_rc"
