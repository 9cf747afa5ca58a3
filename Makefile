# Thin wrapper over scripts/ and CMake presets. The two quick-start commands:
#   make run    install what is missing, build, and start the server on the default model
#   make test   install what is missing, build, and run every test (release; ASan/UBSan and
#               TSan on the folders where they find bugs; AArch64 NEON under qemu; bounded fuzzing;
#               a 2-minute soak of the real server)
SHARED ?= ../shared
MODEL ?= $(SHARED)/models/stories260K.bin
TOKENIZER ?= $(SHARED)/models/tok512.bin
PROMPT ?= Once upon a time
N ?= 200
PORT ?= 8080
FUZZ_SECONDS ?= 20
SOAK_MINUTES ?= 2
JOBS ?= $(shell nproc)
# Folders whose tests also run under AddressSanitizer + UBSan: where the memory bugs live
# (kernels, the paged KV cache, the grammar engine, the engine, the server, the image
# decoders, the tokenizers that parse untrusted vocabularies). The rest run in the release build.
ASAN_DIRS ?= kernels kv grammar engine http server serve_units media tokenizer

# Every build goes through ccache (CMakePresets.json). Paths under this checkout are hashed
# relative to it and the working directory is left out of the hash, so a fresh clone in another
# folder (CI) reuses the objects of earlier builds on the same machine.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE ?= 8G

.PHONY: setup build run generate test test-tsan-server test-release test-asan test-asan-all test-tsan test-aarch64 fuzz soak format tidy clean

setup:
	./scripts/setup.sh

build: setup
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

run: build
	./build/release/src/tools/edgelm serve -m "$(MODEL)" --tokenizer "$(TOKENIZER)" --port $(PORT)

generate: build
	./build/release/src/tools/edgelm run -m "$(MODEL)" --tokenizer "$(TOKENIZER)" -p "$(PROMPT)" -n $(N)

test: setup test-release test-asan test-tsan-server test-aarch64 fuzz soak

test-release:
	cmake --preset release -DEDGELM_SHARED_DIR="$(abspath $(SHARED))"
	cmake --build --preset release -j $(JOBS)
	ctest --preset release -j $(JOBS) --no-tests=error

test-asan:
	cmake --preset asan -DEDGELM_SHARED_DIR="$(abspath $(SHARED))"
	cmake --build --preset asan -j $(JOBS) --target edgelm $(addprefix tests_,$(ASAN_DIRS))
	ctest --preset asan -j $(JOBS) --no-tests=error -L '^dir_($(subst $(eval) ,|,$(strip $(ASAN_DIRS))))$$'

# The whole tree under AddressSanitizer (not part of `make test`).
test-asan-all:
	cmake --preset asan -DEDGELM_SHARED_DIR="$(abspath $(SHARED))"
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

test-tsan:
	cmake --preset tsan -DEDGELM_SHARED_DIR="$(abspath $(SHARED))"
	cmake --build --preset tsan -j $(JOBS)
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp" ctest --preset tsan -j $(JOBS)

# Cross-compiles the NEON kernels' self-test for AArch64 and runs it under qemu-user.
# The server and the engine under ThreadSanitizer (the threaded parts; the whole tree is
# `make test-tsan`).
test-tsan-server:
	cmake --preset tsan -DEDGELM_SHARED_DIR="$(abspath $(SHARED))"
	cmake --build --preset tsan -j $(JOBS) --target test_server test_server_router test_engine
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp" ctest --preset tsan -j $(JOBS) --no-tests=error -L '^server$$'
	./build/tsan/tests/engine/test_engine

test-aarch64:
	./scripts/test-aarch64.sh

# Builds the libFuzzer targets and runs each briefly from a seed corpus of real and synthetic models.
fuzz:
	./scripts/fuzz.sh "$(SHARED)" $(FUZZ_SECONDS)

# The real server under mixed load for SOAK_MINUTES (scripts/soak.sh): no failed request other
# than deliberate 429/503 and the soak's own cancellations, a clean SIGTERM exit, flat RSS.
soak:
	cmake --preset release -DEDGELM_SHARED_DIR="$(abspath $(SHARED))"
	cmake --build --preset release -j $(JOBS) --target edgelm
	EDGELM_SHARED_DIR="$(abspath $(SHARED))" ./scripts/soak.sh $(SOAK_MINUTES)

format:
	git ls-files '*.h' '*.cpp' | xargs clang-format -i

tidy: build
	git ls-files 'src/*.cpp' | xargs clang-tidy -p build/release --quiet

clean:
	rm -rf build
