// Server configuration: one ServeConfig assembled from defaults, a YAML file, the environment
// and command-line flags, validated once before the server starts.
//
// Precedence, lowest to highest: the defaults below < the YAML file (load_config_file) <
// environment variables (apply_env) < flags (applied by the caller, last). Each layer only
// overrides what it sets; a list (api_keys) is replaced as a whole, not merged.
//
// Invariants: the loaders report every user mistake (unknown key, wrong type, bad number,
// unreadable file) as an Error naming the key, variable or file; they never throw. describe()
// never prints a secret (api keys, admin token).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"

namespace edgelm::serve {

struct ServeConfig {
  std::string model_path, tokenizer_path, host = "127.0.0.1";
  int port = 8080;
  std::string model_name;  // default: file stem of model_path
  std::string chat_template;  // a built-in name or a Jinja file; default: the GGUF's template
  std::string device_id;   // default: host name
  int threads = 0;
  std::string cpu_affinity;
  std::string kv_type = "f16";
  std::string kv_memory = "512M";
  int max_batch_tokens = 512, max_batch_size = 32;
  double target_step_ms = 250;
  int state_snapshot_interval = 16;  // hybrid models: recurrent-state snapshot every N KV blocks (0: off)
  // The prefix KV cache's disk tier (kv/disk_tier.h): its directory (empty: off) and the most
  // bytes of block files it holds (LRU).
  std::string kv_disk;
  std::string kv_disk_size = "2G";
  int max_queue = 64;
  int max_connections = 4096;  // open HTTP connections; beyond: 503 at once (idle ones cost no thread)
  // Transport timeouts (seconds): the whole request header, each body read, an idle
  // keep-alive connection, each response write.
  double header_timeout_s = 10, body_timeout_s = 30, idle_timeout_s = 60, write_timeout_s = 30;
  size_t stream_buffer_bytes = 256 << 10;      // SSE output a slow reader may leave unread before it is cut
  size_t max_body_bytes = 1 << 20;             // JSON request bodies
  size_t max_upload_bytes = size_t{16} << 30;  // models uploaded to POST /reload
  int n_ctx = 0;
  std::vector<std::string> api_keys;
  std::string admin_token;
  bool auth_health = false, auth_metrics = false;
  // Who shares prefix-KV and response-cache entries: "key" (each API key its own), "global"
  // (everyone), or empty: key when api_keys are configured, else global.
  std::string prefix_cache_scope;
  double drain_timeout_s = 30;
  // Response cache (serve/routes_cache.h): off | exact | semantic (semantic includes exact).
  std::string cache = "off";
  double cache_threshold = 0.80;            // cosine similarity of a semantic hit (README: eval-cache)
  int cache_capacity = 1000;                // entries
  double cache_ttl_s = 0;                   // 0: entries do not expire
  std::string cache_db;                     // SQLite file (WAL); empty: memory only
  // lexical | lexical-plain | self | path of an embedding GGUF (embed/text_encoder.h: bert,
  // nomic-bert, jina-bert-v2, XLM-RoBERTa, gemma-embedding, qwen3 embedding)
  std::string embedding_model = "lexical";
  // The instruction prepended to cache queries for an embedding GGUF: "auto" (the model card's),
  // "none", or the text itself.
  std::string embedding_prefix = "auto";
  // JSON written by `edgelm eval-cache --calibrate-out`: the threshold and prior slope tuned for
  // this embedder (refused when its embedder name differs from the one configured).
  std::string cache_calibration;
  // Guards on semantic hits: all | none | a list of negation,numbers,entities,opposites.
  std::string cache_guards = "all";
  double cache_max_error_rate = 0.01;                    // per-entry error bound of semantic hits (cache/error_bound.h)
  std::string cache_wordnet_dir = "/usr/share/wordnet";  // WordNet 3.0 (Debian wordnet-base)
  size_t cache_max_bytes = size_t{64} << 20;
  size_t cache_max_prompt_bytes = 16384;  // larger prompts are not cached
  bool cache_case_fold = true;            // exact keys ignore case
  bool cache_nondeterministic = false;    // also cache sampled requests without a seed
  // Thinking models (serve/reasoning.h): the markers as "START,END" (empty: <think>,</think>
  // when the chat template writes them), the sentence written after a span its budget closed,
  // and the token budgets that reasoning_effort low / medium / high stand for.
  std::string reasoning_markers;
  std::string reasoning_transition;
  int reasoning_effort_low = 256, reasoning_effort_medium = 1024, reasoning_effort_high = 4096;
  // Speculative decoding (engine/draft_model.h): off | ngram[:N], or a draft model from a file
  // (draft_model; a llama2.c checkpoint uses tokenizer_path) or the target quantized in memory
  // (draft_quant, e.g. q4_0). Every slot, hot-reloaded ones too, gets its own draft.
  std::string spec = "off";
  std::string draft;  // "mtp": the model's own MTP head (same as spec mtp); empty: none
  std::string draft_model;
  std::string draft_quant;
  int draft_max = 8, draft_min = 0;  // drafted tokens per step, at most / at least
  // Several models and the router (serve/model_spec.h, serve/router.h): each item is
  // "NAME=PATH,tier=small|medium|large[,tokenizer=P][,profile=P][,dyn_temp=MIN:START:FULL]";
  // set either this or model_path. EDGELM_MODELS separates items with ';'.
  std::vector<std::string> models;
  std::string upstream;                   // cloud tier: "name=URL[,api_key_env=VAR,...]" (serve/upstream.h)
  double default_budget_ms = 30000;       // latency budget of a routed request that states none
  std::string startup_profile = "quick";  // quick | off: profile models without a profile file at startup
  double startup_profile_budget_s = 20;   // wall time of the startup profile of all models (0: none)
  std::string memory_budget = "0";        // weights + KV of all models (e.g. 4G); 0: no limit
  bool no_mmap = false;                   // read model files into memory instead of mapping them (format::LoadOptions)
  // Image input (serve/image_input.h): the vision encoder beside the (first) model, the pixel
  // cap of a decoded image, images per request, and encoder outputs cached by image SHA-256.
  std::string mmproj;
  int image_max_pixels = 50'000'000;
  int max_images_per_request = 8;
  int image_cache = 16;
  // Image sources besides data: URLs (serve/image_source.h): file:// under media_path (off when
  // empty); http(s):// when allow_image_urls, within image_url_timeout_s, to public addresses
  // and the image_url_allow_cidr ranges (serve/url_guard.h); every image at most image_max_bytes.
  std::string media_path;
  bool allow_image_urls = false;
  double image_url_timeout_s = 10;
  std::vector<std::string> image_url_allow_cidr;
  size_t image_max_bytes = size_t{20} << 20;
  // Embedding and reranker models served with -m (serve/routes_embeddings.cpp): the pooling
  // instead of the file's (mean | cls | last; empty: the file's), and the most tokens one
  // TextEncoder::encode() call takes (a request's inputs above it go through several calls).
  std::string pooling;
  int embed_batch_tokens = 8192;
};

// Reads a YAML mapping whose keys are the field names above (snake_case) over `base`.
// Sizes (kv_memory, max_body_bytes, max_upload_bytes) may be written as 512M / 1M / 1048576; api_keys is a list
// of strings (or one string). The extra key `api_key_file` appends the keys of that file
// (load_api_key_file; a relative path is relative to the YAML file's folder).
// Errors: unreadable file, YAML syntax (with line), top level not a mapping, unknown key,
// wrong type (each naming the key).
Result<ServeConfig> load_config_file(const std::string& yaml_path, ServeConfig base);

// Overrides fields from environment variables read through `getenv` (std::getenv in the
// server; a map in tests). Every field has EDGELM_<FIELD IN UPPER CASE> (EDGELM_PORT,
// EDGELM_MAX_QUEUE, EDGELM_KV_MEMORY, EDGELM_DRAIN_TIMEOUT_S, ...), plus the short names
// EDGELM_MODEL (model_path) and EDGELM_TOKENIZER (tokenizer_path). EDGELM_API_KEYS is
// comma-separated (blanks trimmed, empty items dropped); booleans take 1/0, true/false,
// yes/no, on/off. A variable set to the empty string counts as unset.
Status apply_env(ServeConfig& config, const std::function<const char*(const char*)>& getenv);

// Appends the keys of a file: one key per line, surrounding blanks trimmed, blank lines and
// lines starting with '#' skipped. A file with no key is an error (almost surely a mistake).
Status load_api_key_file(ServeConfig& config, const std::string& path);

// Fills the derived defaults left empty: model_name (file stem of model_path) and device_id
// (default_device_id()). Call after the flags, before validate/describe.
void fill_derived_defaults(ServeConfig& config);

// Checks ranges and formats: a model path (or models, each a valid spec with a unique name),
// an upstream that parses, startup_profile quick/off, startup_profile_budget_s >= 0,
// memory_budget a size, port 0..65535 (0: any free port), kv_type one of f16/f32/q8_0,
// kv_memory a size, positive batch limits, queue and connection limits >= 1,
// non-negative timeouts, keys without blanks, spec off/ngram[:N], draft_max in [1, 64],
// draft_min in [0, draft_max], at most one of ngram / draft_model / draft_quant.
Status validate(const ServeConfig& config);

// One "key: value" line per setting, in declaration order; api keys and the admin token are
// shown as "****" with their count, e.g. "api_keys: **** (2 keys)".
std::string describe(const ServeConfig& config);

// Every setting in declaration order, raw (secrets included: callers mask them, as
// serve/config_view.h does for GET /admin/config). `is_size`: a byte count.
using SettingValue = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;
void for_each_setting(const ServeConfig& config,
                      const std::function<void(std::string_view key, const SettingValue& value, bool is_size)>& fn);

// memory_budget in bytes; 0: no limit. Errors: not a size.
Result<size_t> memory_budget_bytes(const ServeConfig& config);

// This machine's host name ("edge" if it cannot be read): the default device_id label.
std::string default_device_id();

}  // namespace edgelm::serve
