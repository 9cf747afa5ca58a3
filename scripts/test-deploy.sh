#!/usr/bin/env bash
# Checks one shipped deployment file with its own tool (ctest: deploy_<check>):
#   haproxy  haproxy -c -f deploy/haproxy/haproxy.cfg
#   nginx    nginx -t on deploy/nginx/nginx.conf (prefix, pid and logs in WORK_DIR)
#   systemd  systemd-analyze verify deploy/systemd/edgelm.service (ExecStart pointed at a binary
#            that exists here: verify checks that it is executable)
#   k8s      deploy/k8s/*.yaml against the Kubernetes schemas (tests/clients/k8s_schema, npm ci
#            by scripts/setup.sh)
# Usage: scripts/test-deploy.sh CHECK WORK_DIR. Exit 77 (skipped) when the tool is missing.
set -euo pipefail

check="$1"
work="${2:-$(mktemp -d)}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$work"
need() { command -v "$1" >/dev/null 2>&1 || { echo "test-deploy: $1 not found; skipped" >&2; exit 77; }; }
# Debian puts haproxy and nginx in /usr/sbin, which a normal user's PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

case "$check" in
  haproxy)
    need haproxy
    haproxy -c -f "$root/deploy/haproxy/haproxy.cfg"
    ;;
  nginx)
    need nginx
    mkdir -p "$work/nginx"
    nginx -t -p "$work/nginx/" -e stderr -c "$root/deploy/nginx/nginx.conf"
    ;;
  systemd)
    need systemd-analyze
    unit="$work/edgelm.service"
    sed 's#^ExecStart=/usr/local/bin/edgelm #ExecStart=/bin/true #' "$root/deploy/systemd/edgelm.service" >"$unit"
    grep -q '^ExecStart=/bin/true ' "$unit" || { echo "test-deploy: ExecStart is not /usr/local/bin/edgelm" >&2; exit 1; }
    out="$(systemd-analyze verify "$unit" 2>&1)" || { echo "$out" >&2; exit 1; }
    # verify only warns about unknown keys and misplaced settings: fail on any output.
    if [ -n "$out" ]; then echo "$out" >&2; exit 1; fi
    echo "systemd-analyze verify: ok"
    ;;
  k8s)
    need node
    dir="$root/tests/clients/k8s_schema"
    if [ ! -d "$dir/node_modules/kubernetes-models" ]; then
      echo "test-deploy: $dir/node_modules missing (run scripts/setup.sh); skipped" >&2
      exit 77
    fi
    node "$dir/validate.mjs" "$root"/deploy/k8s/*.yaml
    ;;
  *)
    echo "usage: $0 haproxy|nginx|systemd|k8s WORK_DIR" >&2
    exit 2
    ;;
esac
