#!/usr/bin/env bash
# The numbers of the cluster note (README: Cluster): 3 stories260K nodes behind HAProxy started
# from deploy/haproxy/haproxy.cfg (ports substituted), then
#   1. affinity vs least-connections on a multi-turn workload (prefix-hit ratio, TTFT),
#   2. failover: a node killed with SIGKILL mid-load (requests ok / failed per second),
#   3. a rolling `edgelm fleet reload` mid-load (the same timeline).
# Usage: scripts/cluster-measure.sh [BUILD_DIR] [OUT_DIR]   (needs haproxy; ~1 minute)
# Env: DURATION (s, default 10), CONC (workers, default 6), BASE_PORT (default: 5 free ports), MODEL.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
out="${2:-$(mktemp -d)}"
bin="$build/src/tools/edgelm"
models="${EDGELM_SHARED_DIR:-$root/../shared}/models"
# MODEL: a GGUF to serve instead of stories260K (whose prefill is too quick for TTFT to show
# what a kept prefix saves), e.g. a random-weight one from
#   edgelm synth -o slow.gguf --dim 288 --layers 6 --ff 768 --heads 6 --kv-heads 6 --vocab-from tok512.bin --ctx 1024
model="${MODEL:-$models/stories260K.bin}"
tok_args=""
[ -n "${MODEL:-}" ] || tok_args="--tokenizer $models/tok512.bin"
dur="${DURATION:-10}"
conc="${CONC:-6}"
# Five consecutive ports nobody listens on (other servers may run on this machine).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base="${BASE_PORT:-}"
while [ -z "$base" ]; do
  b=$((20000 + RANDOM % 30000))
  if port_free $b && port_free $((b + 1)) && port_free $((b + 2)) && port_free $((b + 3)) && port_free $((b + 4)); then
    base=$b
  fi
done
front=$base
nodes=($((base + 1)) $((base + 2)) $((base + 3)))
stats=$((base + 4))
urls="http://127.0.0.1:${nodes[0]},http://127.0.0.1:${nodes[1]},http://127.0.0.1:${nodes[2]}"
export EDGELM_ADMIN_TOKEN=measure-token
export PATH="$PATH:/usr/sbin"
mkdir -p "$out"
declare -a pids=()
hap=""

start_nodes() {
  pids=()
  for p in "${nodes[@]}"; do
    "$bin" serve -m "$model" $tok_args --host 127.0.0.1 --port "$p" \
      -t 1 --kv-memory 16M --admin-token "$EDGELM_ADMIN_TOKEN" --upload-dir "$out" >"$out/node-$p.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:${nodes[$i]}/health" >/dev/null && break; sleep 0.1; done
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "node ${nodes[$i]} did not start: $(tail -2 "$out/node-${nodes[$i]}.log")" >&2; exit 1; }
  done
}
wait_front() { for _ in $(seq 100); do curl -sf "http://127.0.0.1:$front/health" >/dev/null && return; sleep 0.1; done; echo "haproxy does not serve" >&2; exit 1; }
stop_nodes() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait "${pids[@]}" 2>/dev/null || true; }
cleanup() { stop_nodes; [ -z "$hap" ] || kill "$hap" 2>/dev/null || true; }
trap cleanup EXIT

sed -e "s/127.0.0.1:8081/127.0.0.1:${nodes[0]}/g" -e "s/127.0.0.1:8082/127.0.0.1:${nodes[1]}/g" \
  -e "s/127.0.0.1:8083/127.0.0.1:${nodes[2]}/g" -e "s/127.0.0.1:8080/127.0.0.1:$front/" \
  -e "s/127.0.0.1:8404/127.0.0.1:$stats/" "$root/deploy/haproxy/haproxy.cfg" >"$out/haproxy.cfg"
haproxy -db -f "$out/haproxy.cfg" >"$out/haproxy.log" 2>&1 &
hap=$!

echo "load before: $(uptime)"
# roundrobin: the shipped config with `balance roundrobin` instead of leastconn (a measurement
# variant only: in a closed loop leastconn tends to send a worker's next turn back to the node
# it just left, which is affinity by accident).
for mode in affinity leastconn roundrobin; do
  if [ "$mode" = roundrobin ]; then
    kill "$hap"; wait "$hap" 2>/dev/null || true
    sed -i 's/balance leastconn/balance roundrobin/' "$out/haproxy.cfg"
    haproxy -db -f "$out/haproxy.cfg" >>"$out/haproxy.log" 2>&1 &
    hap=$!
  fi
  start_nodes
  wait_front
  flag=""
  [ "$mode" = affinity ] || flag="--no-session-id"
  "$bin" loadtest --url "http://127.0.0.1:$front" --multi-turn 4 --concurrency "$conc" --duration "$dur" \
    --max-tokens 32 --node-metrics "$urls" $flag --json >"$out/$mode.json"
  stop_nodes
done
kill "$hap"; wait "$hap" 2>/dev/null || true
sed -i 's/balance roundrobin/balance leastconn/' "$out/haproxy.cfg"
haproxy -db -f "$out/haproxy.cfg" >>"$out/haproxy.log" 2>&1 &
hap=$!

start_nodes
wait_front
"$bin" loadtest --url "http://127.0.0.1:$front" --concurrency "$conc" --duration "$dur" --max-tokens 16 --timeline \
  --json >"$out/failover.json" &
lt=$!
sleep 3
kill -9 "${pids[1]}"
echo "killed node ${nodes[1]} at t=3 s"
wait "$lt"
stop_nodes

start_nodes
wait_front
"$bin" loadtest --url "http://127.0.0.1:$front" --concurrency "$conc" --duration "$dur" --max-tokens 16 --timeline \
  --json >"$out/rolling.json" &
lt=$!
sleep 2
t0=$(date +%s.%N)
"$bin" fleet reload --nodes "$urls" --model "$models/stories260K-f32.gguf" 2>"$out/fleet.log" || echo "fleet reload FAILED: $(tail -1 "$out/fleet.log")"
echo "fleet reload from t=2 s, took $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
wait "$lt"
echo "load after: $(uptime)"

/usr/bin/python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
for mode in ("affinity", "leastconn", "roundrobin"):
    j = json.load(open(os.path.join(out, mode + ".json")))
    c = j["conversations"]
    ms = lambda s: f'{s["p50"]*1e3:.2f}/{s["p95"]*1e3:.2f}'
    nodes = ", ".join(f"{v:.3f}" if v is not None else "n/a" for v in c["node_prefix_cache_hit_ratio"].values())
    print(f'{mode:10}: {j["requests"]["ok"]} turns ok, {j["requests"]["failed"]} failed; cached share of turns 2+ '
          f'{c["later_cached_ratio"]*100:.1f}%; node prefix-hit ratios {nodes}; TTFT p50/p95 ms: all {ms(j["latency_s"]["ttft"])}, '
          f'turn 1 {ms(c["ttft_first_turn"])}, turns 2+ {ms(c["ttft_later_turns"])}')
for run in ("failover", "rolling"):
    j = json.load(open(os.path.join(out, run + ".json")))
    tl = " ".join(f'{t["second"]}:{t["ok"]}/{t["failed"]}' for t in j["timeline"])
    print(f'{run:10}: {j["requests"]["ok"]} ok, {j["requests"]["failed"]} failed {j["errors"]}; per second ok/failed: {tl}')
PY
echo "outputs in $out"
