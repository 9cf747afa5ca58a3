#!/usr/bin/env bash
# Installs the Debian 12 packages that building and testing edgelm needs.
# Idempotent: installs only what is missing. Runs apt-get as root, or via sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libpcre2-dev libutf8proc-dev libssl-dev
  libcpp-httplib-dev libboost-dev libyaml-cpp-dev prometheus libhnswlib-dev libsqlite3-dev
  clang libclang-rt-14-dev clang-format clang-tidy python3-jsonschema
  g++-aarch64-linux-gnu qemu-user
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
