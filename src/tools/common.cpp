#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/byte_size.h"
#include "core/thread_pool.h"
#include "tools/command.h"

namespace edgelm::tools {

int report_error(const Error& error) {
  std::fprintf(stderr, "edgelm: error: %s\n", error.message.c_str());
  return 1;
}

int default_threads() { return ThreadPool::hardware_threads(); }

Result<std::unique_ptr<ThreadPool>> make_thread_pool(int threads, const std::string& cpu_affinity) {
  const int n = threads > 0 ? threads : default_threads();
  std::vector<int> cpus;
  if (!cpu_affinity.empty()) {
    EDGELM_TRY(cpus, ThreadPool::parse_cpu_list(cpu_affinity));
  }
  if (n > ThreadPool::hardware_threads()) {
    std::fprintf(stderr,
                 "edgelm: warning: %d threads on %d hardware threads: oversubscribed threads slow each other down\n", n,
                 ThreadPool::hardware_threads());
  }
  return std::make_unique<ThreadPool>(n, cpus);
}

void add_thread_options(CLI::App* cmd, int& threads, std::string& cpu_affinity) {
  cmd->add_option("-t,--threads", threads, "Threads (default: all hardware threads)")->check(CLI::PositiveNumber);
  cmd->add_option("--cpu-affinity", cpu_affinity, "Pin the threads to these CPUs, e.g. 0,1 or 2-3");
}

void add_engine_options(CLI::App* cmd, EngineFlags& f) {
  cmd->add_option("--kv-type", f.kv_type, "KV cache element type: f16, f32 or q8_0")->capture_default_str();
  cmd->add_option("--kv-memory", f.kv_memory, "KV cache pool size, e.g. 256M or 2G")->capture_default_str();
  cmd->add_option("--max-batch-tokens", f.max_batch_tokens, "Tokens per engine step (decode + prefill chunks)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-batch-size", f.max_batch_size, "Most sequences running at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--target-step-ms", f.target_step_ms,
                  "Step latency the adaptive batch size aims under (0: fixed at --max-batch-size)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--state-snapshot-interval", f.state_snapshot_interval,
                  "Hybrid recurrent models (qwen35): snapshot the recurrent state every N KV blocks so that prompts "
                  "sharing a prefix reuse it (0: off, no prefix reuse); the snapshots share --kv-memory")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
}

Result<engine::EngineOptions> engine_options(const EngineFlags& f) {
  engine::EngineOptions o;
  EDGELM_TRY(o.kv_type, kv::kv_type_from_name(f.kv_type));
  EDGELM_TRY(o.kv_memory_bytes, parse_byte_size(f.kv_memory));
  o.scheduler.max_batch_tokens = f.max_batch_tokens;
  o.scheduler.max_batch_size = f.max_batch_size;
  o.scheduler.target_step_ms = f.target_step_ms;
  o.state_snapshot_interval = f.state_snapshot_interval;
  EDGELM_TRY_STATUS(engine::validate(o));
  return o;
}

void add_spec_options(CLI::App* cmd, SpecFlags& f) {
  cmd->add_option("--spec", f.spec, "Speculative decoding without a draft model: off, ngram[:N] (prompt lookup) or mtp (as --draft mtp)")
      ->capture_default_str();
  cmd->add_option("--draft", f.draft,
                  "Built-in draft source: mtp (the model file's own MTP head; qwen35 with nextn_predict_layers)");
  cmd->add_option("--draft-model", f.draft_model, "Speculative decoding with this draft model (same vocabulary)");
  cmd->add_option("--draft-quant", f.draft_quant,
                  "Speculative decoding with the target quantized in memory to TYPE (e.g. q4_0) as the draft");
  cmd->add_option("--draft-max", f.draft_max, "Most tokens drafted per step")->capture_default_str();
  cmd->add_option("--draft-min", f.draft_min, "Fewest tokens drafted while speculating (0: may fall to plain decoding)")
      ->capture_default_str();
}

CLI::Option* add_model_load_options(CLI::App* cmd, format::LoadOptions& load) {
  return cmd->add_flag("--no-mmap", load.no_mmap,
                       "Read the model file into memory instead of mapping it: costs its size in RAM and a full "
                       "read at load, but the file may then be overwritten, truncated or deleted safely");
}

Result<std::vector<int>> parse_int_list(const std::string& text, int min, int max, std::string_view flag,
                                        std::string_view what, std::string_view example) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      const int v = std::stoi(item, &pos);
      if (pos != item.size() || v < min || v > max) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return make_error("{}: '{}' is not a {} in [{}, {}] (example: {})", flag, item, what, min, max, example);
    }
  }
  if (out.empty()) return make_error("{} needs at least one {} (example: {})", flag, what, example);
  return out;
}

}  // namespace edgelm::tools
