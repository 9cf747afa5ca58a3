#!/usr/bin/env bash
# Installs the Debian 12 packages that building and testing edgelm needs, and the npm packages
# of the client tests (tests/clients/*: the official OpenAI Node client, the Kubernetes schema
# validator), of the browser test (tests/browser: playwright-core, driving Debian's chromium) and
# of the dashboard's build (web/dashboard: Vite, Preact, uPlot), each pinned by its lockfile.
# Idempotent: installs only what is missing. Runs apt-get as root, or via sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libpcre2-dev libutf8proc-dev libssl-dev
  libcpp-httplib-dev libboost-dev libyaml-cpp-dev prometheus libhnswlib-dev libsqlite3-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev libexif-dev python3-pil python3-numpy
  wordnet-base
  clang libclang-rt-14-dev clang-format clang-tidy
  python3-jsonschema python3-jinja2
  chromium haproxy nginx systemd
  g++-aarch64-linux-gnu qemu-user
)
# Node.js and npm: Debian's packages unless a node with npm is already installed (e.g. from
# NodeSource, whose nodejs package conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  # nginx and haproxy would start as system services on install (nginx on :80); the tests run
  # their own instances, so keep the services from starting where invoke-rc.d honours
  # policy-rc.d (containers), and stop them where they started anyway.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
    "${sudo_cmd[@]}" chmod +x "$policy"
    made_policy=1
  fi
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  [ "$made_policy" -eq 0 ] || "${sudo_cmd[@]}" rm -f "$policy"
  # Only the services this run installed: a balancer the machine already ran stays as it was.
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    for svc in nginx haproxy; do
      case " ${missing[*]} " in *" $svc "*) "${sudo_cmd[@]}" systemctl disable --now "$svc" >/dev/null 2>&1 || true ;; esac
    done
  fi
fi

# npm packages of the client and browser tests and of the dashboard, exactly as their lockfiles
# say (reinstalled when a lockfile changes; the build's cmake/npm_ci.cmake makes the same test,
# so a build after this runs no npm ci).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for dir in "$root"/tests/clients/*/ "$root"/tests/browser/ "$root"/web/dashboard/; do
  [ -f "$dir/package-lock.json" ] || continue
  stamp="$dir/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
    echo "setup: npm ci in ${dir#"$root"/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done
