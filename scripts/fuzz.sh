#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for a bounded time from a
# seed corpus: the small real GGUFs in shared/ plus tiny synthetic models of each architecture.
# Usage: scripts/fuzz.sh [SHARED_DIR] [SECONDS_PER_TARGET]
set -euo pipefail
shared=$(realpath "${1:-../shared}")
seconds=${2:-30}
cd "$(dirname "$0")/.."

cmake --preset fuzz -DEDGELM_SHARED_DIR="$shared" >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target fuzz_gguf fuzz_tokenizers
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target edgelm

work=build/fuzz/corpus
rm -rf "$work" && mkdir -p "$work/gguf" "$work/text"
cp "$shared/vocab/ggml-vocab-bert-bge.gguf" "$work/gguf/" 2>/dev/null || true
./build/release/src/tools/edgelm synth -o "$work/gguf/llama.gguf" --dim 8 --layers 1 --ff 16 --heads 2 --kv-heads 1 --n-vocab 16 2>/dev/null
./build/release/src/tools/edgelm synth -o "$work/gguf/qwen2.gguf" --arch qwen2 --dim 8 --layers 1 --ff 16 --heads 2 --kv-heads 2 --n-vocab 16 --type f16 2>/dev/null
head -c 16384 "$shared/models/stories260K-f16.gguf" > "$work/gguf/stories-head.gguf"

# Text seeds: the reference tokenizer test strings, each prefixed by a selector byte.
i=0
for f in "$shared"/vocab/*.inp; do
  for sel in 0 1 2 3 129 130; do
    { printf "\\$(printf %03o "$sel")"; head -c 2000 "$f"; } > "$work/text/seed-$i"; i=$((i + 1))
  done
done

run_fuzzer() {  # name corpus max_len
  echo "fuzz: $1 for ${seconds}s"
  "./build/fuzz/tests/fuzz/$1" -max_total_time="$seconds" -max_len="$3" -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$work/" \
    -print_final_stats=1 "$2" 2>&1 | tail -n 6
  echo "fuzz: $1 finished without a crash"
}
run_fuzzer fuzz_gguf "$work/gguf" 65536
run_fuzzer fuzz_tokenizers "$work/text" 8192
