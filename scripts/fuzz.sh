#!/usr/bin/env bash
# Builds the libFuzzer targets in the asan preset's tree (clang, ASan+UBSan: the same objects
# as the sanitizer tests, so CI compiles the libraries once for both) and runs each for a bounded
# time from a seed corpus: the small real GGUFs in shared/ plus tiny synthetic models of each architecture
# and of each tensor type of the low-bit formats (grid IQ types retyped by scripts/gguf_retype.py,
# the others written by edgelm quantize).
# Usage: scripts/fuzz.sh [SHARED_DIR] [SECONDS_PER_TARGET]
set -euo pipefail
shared=$(realpath "${1:-../shared}")
seconds=${2:-30}
cd "$(dirname "$0")/.."

cmake --preset asan -DEDGELM_SHARED_DIR="$shared" >/dev/null
cmake --build --preset asan -j "$(nproc)" --target fuzz_gguf fuzz_tokenizers fuzz_routes fuzz_http_raw fuzz_gbnf fuzz_image
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target edgelm

work=build/asan/fuzz-corpus
rm -rf "$work" && mkdir -p "$work/gguf" "$work/text" "$work/routes" "$work/http" "$work/gbnf" "$work/image"
cp "$shared/vocab/ggml-vocab-bert-bge.gguf" "$work/gguf/" 2>/dev/null || true
./build/release/src/tools/edgelm synth -o "$work/gguf/llama.gguf" --dim 8 --layers 1 --ff 16 --heads 2 --kv-heads 1 --n-vocab 16 2>/dev/null
./build/release/src/tools/edgelm synth -o "$work/gguf/qwen2.gguf" --arch qwen2 --dim 8 --layers 1 --ff 16 --heads 2 --kv-heads 2 --n-vocab 16 --type f16 2>/dev/null
head -c 16384 "$shared/models/stories260K-f16.gguf" > "$work/gguf/stories-head.gguf"
./build/release/src/tools/edgelm synth -o "$work/gguf/xlmr-vocab.gguf" --vocab-only xlmr --n-vocab 1000 2>/dev/null
# One seed per grid IQ type: a tiny model whose ffn_down (32 rows of one 256-element block) is
# retyped from F16 to random valid blocks (not quantized, so no imatrix is needed); 58 KB, under the
# 64 KiB limit.
./build/release/src/tools/edgelm synth -o "$work/iq-base.gguf" --dim 32 --layers 1 --ff 256 --heads 2 --kv-heads 1 --n-vocab 16 --type f16 2>/dev/null
for t in iq2_xxs:16 iq2_xs:17 iq3_xxs:18 iq1_s:19 iq3_s:21 iq2_s:22 iq1_m:29; do
  cp "$work/iq-base.gguf" "$work/gguf/${t%%:*}.gguf"
  python3 scripts/gguf_retype.py "$work/gguf/${t%%:*}.gguf" 'blk\.0\.ffn_down\.weight' "${t##*:}"
done
# And one per type that edgelm quantize writes beyond the legacy and K types: the same tensor
# quantized to it (about 46 KB each).
for t in q2_k q3_k iq4_nl iq4_xs tq1_0 tq2_0 mxfp4; do
  ./build/release/src/tools/edgelm quantize "$work/iq-base.gguf" "$work/gguf/$t.gguf" f16 \
    --tensor-type "blk\.0\.ffn_down\.weight=$t" > /dev/null
done

# Text seeds: the reference tokenizer test strings, each prefixed by a selector byte.
i=0
for f in "$shared"/vocab/*.inp; do
  for sel in 0 1 2 3 4 129 130; do
    { printf "\\$(printf %03o "$sel")"; head -c 2000 "$f"; } > "$work/text/seed-$i"; i=$((i + 1))
  done
done

# Route seeds: a selector byte (route, framing) and a body; the hostile shapes of issue 17
# (deep nesting, huge numbers, NUL and invalid UTF-8 in prompts) among them.
route_seed() { printf "\\$(printf %03o "$1")%b" "$2" > "$work/routes/seed-$1-$3"; }
n=0
for body in '{"prompt":"Once upon a time","max_tokens":4}' \
            '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true}' \
            '{"input":"Once","max_tokens":1e999}' '{"prompt":"a\\u0000b","max_tokens":99999999999999999999}' \
            '{"prompt":"\xff\xfe\xc3","max_tokens":2}' '{"content":"Once upon","add_special":true}' \
            '{"tokens":[1,2,3,-5,999999]}' '{"input":["a","b"]}' '{"path":"/nonexistent.gguf","sha256":"zz"}' \
            "$(printf '%.0s[' $(seq 1 200))" '{"prompt":"x","cache_salt":7,"stop":[1]}' \
            '{"prompt":"x","max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":-5,"maximum":300},"s":{"type":"string","pattern":"^[a-c]{2,4}$"}},"required":["n"]}}}}' \
            '{"prompt":"x","max_tokens":4,"grammar":"root ::= [a-z]{1,3} (\" \" root)?"}' \
            '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":30,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"enum":[1,"x",null]}}}}}],"tool_choice":"required","stream":true}' \
            '{"input":"x","max_tokens":9,"schema":{"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"$ref":"#/$defs/t"}}'; do
  for sel in 0 1 2 3 4 5 6 7 128 129; do route_seed "$sel" "$body" "$n"; done
  n=$((n + 1))
done
# Raw HTTP seeds: valid, pipelined, broken request lines, chunking and headers.
printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' > "$work/http/health"
printf 'GET /health HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\nPOST /tokenize HTTP/1.1\r\nContent-Length: 11\r\n\r\n{"content":' > "$work/http/pipelined"
printf 'POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n' > "$work/http/bad-chunk"
printf 'POST /predict HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{"in"}' > "$work/http/two-lengths"
printf 'G\x00T /\xff HTTP/9.9\r\n\r\n' > "$work/http/bad-line"
{ printf 'GET /health HTTP/1.1\r\nX: '; head -c 20000 /dev/zero | tr '\0' a; printf '\r\n\r\n'; } > "$work/http/huge-header"
printf 'POST /reload HTTP/1.1\r\nContent-Type: multipart/form-data; boundary=B\r\nAuthorization: Bearer fuzz-admin\r\nContent-Length: 60\r\n\r\n--B\r\nContent-Disposition: form-data; name="model"\r\n\r\nGGUF\r\n--B--' > "$work/http/upload"

# GBNF seeds: grammar text, a NUL, then the bytes a matcher is fed.
printf 'root ::= "{" ws "\"a\"" ws ":" ws [0-9]{1,3} ws "}"\nws ::= [ \\t\\n]{0,4}\0{ "a" : 12 }' > "$work/gbnf/json"
printf 'root ::= item ("," item)*\nitem ::= [^,\\x00-\\x1f]+ | "\\u00e9"\0ab,\xc3\xa9,c' > "$work/gbnf/utf8"
printf 'root ::= ("a" | "ab")* "b"? [^\\n]{2,5}\0abababxy' > "$work/gbnf/ambiguous"
# Found by fuzz_gbnf (a 14 s timeout before StackSet::kMaxEmits): hundreds of nullable items in a row.
printf 'root ::= [^\\n]*{528}\0ababx' > "$work/gbnf/nullable-flood"

# Image seeds: the small JPEG/PNG/WebP files of tests/media (every colour type, progressive,
# interlaced, animated, EXIF orientations) written by python3-pil, kept under 16 KB; without
# python3-pil, stubs that get past the magic bytes.
python=/usr/bin/python3; [ -x "$python" ] || python=python3
if "$python" -c "import PIL, numpy" 2>/dev/null && "$python" -W ignore tests/media/pil_oracle.py decode "$work/image-all"; then
  find "$work/image-all" -type f \( -name '*.jpg' -o -name '*.png' -o -name '*.webp' \) -size -16k -exec cp {} "$work/image/" \;
  rm -rf "$work/image-all"
fi
printf '\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9' > "$work/image/stub.jpg"
printf '\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90\x77\x53\xde' > "$work/image/stub.png"
printf 'RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00' > "$work/image/stub.webp"

run_fuzzer() {  # name corpus max_len
  echo "fuzz: $1 for ${seconds}s"
  local log="$work/$1.log"
  if ! "./build/asan/tests/fuzz/$1" -max_total_time="$seconds" -max_len="$3" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$work/" -print_final_stats=1 "$2" > "$log" 2>&1; then
    # The reason (a sanitizer report, our harness's "fuzz: ..." line, the stack) comes before
    # the input and the final stats; show it without libFuzzer's progress lines.
    grep -v -e '^#[0-9]' -e 'NEW_FUNC' "$log" | tail -n 60
    echo "fuzz: $1 failed; full log in $log"
    return 1
  fi
  tail -n 5 "$log"
  echo "fuzz: $1 finished without a crash"
}
run_fuzzer fuzz_gguf "$work/gguf" 65536
run_fuzzer fuzz_tokenizers "$work/text" 8192
run_fuzzer fuzz_routes "$work/routes" 4096
run_fuzzer fuzz_http_raw "$work/http" 32768
run_fuzzer fuzz_gbnf "$work/gbnf" 2048
run_fuzzer fuzz_image "$work/image" 65536
