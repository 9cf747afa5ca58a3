#include <cstdio>
#include <exception>
#include <string>

#include "core/byte_size.h"
#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/quantize.h"
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
}

Result<engine::EngineOptions> engine_options(const EngineFlags& f) {
  engine::EngineOptions o;
  EDGELM_TRY(o.kv_type, kv::kv_type_from_name(f.kv_type));
  EDGELM_TRY(o.kv_memory_bytes, parse_byte_size(f.kv_memory));
  o.scheduler.max_batch_tokens = f.max_batch_tokens;
  o.scheduler.max_batch_size = f.max_batch_size;
  o.scheduler.target_step_ms = f.target_step_ms;
  EDGELM_TRY_STATUS(engine::validate(o));
  return o;
}

void add_spec_options(CLI::App* cmd, SpecFlags& f) {
  cmd->add_option("--spec", f.spec, "Speculative decoding without a draft model: off, or ngram[:N] (prompt lookup)")
      ->capture_default_str();
  cmd->add_option("--draft-model", f.draft_model, "Speculative decoding with this draft model (same vocabulary)");
  cmd->add_option("--draft-quant", f.draft_quant,
                  "Speculative decoding with the target quantized in memory to TYPE (e.g. q4_0) as the draft");
  cmd->add_option("--draft-max", f.draft_max, "Most tokens drafted per step")->capture_default_str();
  cmd->add_option("--draft-min", f.draft_min, "Fewest tokens drafted while speculating (0: may fall to plain decoding)")
      ->capture_default_str();
}

Status apply_spec_flags(const SpecFlags& f, const model::Model& target, const std::string& tokenizer_path,
                        ThreadPool& pool, engine::SpecOptions& spec, DraftModel& draft) {
  spec.draft_max = f.draft_max;
  spec.draft_min = f.draft_min;
  EDGELM_TRY_STATUS(engine::parse_spec_mode(f.spec, spec));
  if (!f.draft_model.empty() && !f.draft_quant.empty())
    return make_error("--draft-model and --draft-quant exclude each other");
  if ((!f.draft_model.empty() || !f.draft_quant.empty()) && spec.mode == engine::SpecMode::ngram)
    return make_error("--spec ngram and a draft model exclude each other");
  if (!f.draft_model.empty()) {
    EDGELM_TRY(format::ModelFile file, format::open_model_file(f.draft_model, tokenizer_path));
    auto m = model::Model::load(std::move(file));
    if (!m.ok()) return make_error("draft model '{}': {}", f.draft_model, m.error().message);
    draft.model = std::move(m).value();
  } else if (!f.draft_quant.empty()) {
    EDGELM_TRY(const model::QuantPreset preset, model::quant_preset_from_name(f.draft_quant));
    EDGELM_TRY(format::ModelFile file, model::quantize_model(target.file(), preset, pool));
    auto m = model::Model::load(std::move(file));
    if (!m.ok()) return make_error("--draft-quant {}: {}", f.draft_quant, m.error().message);
    draft.model = std::move(m).value();
  }
  if (draft.model) {
    if (draft.model->config().n_vocab != target.config().n_vocab)
      return make_error("the draft model's vocabulary has {} tokens, the target's {}", draft.model->config().n_vocab,
                        target.config().n_vocab);
    draft.runner = std::make_unique<engine::ModelRunner>(*draft.model, pool);
    spec.mode = engine::SpecMode::draft;
    spec.draft_model = draft.runner.get();
  }
  if (spec.mode != engine::SpecMode::off) EDGELM_TRY_STATUS(engine::validate(spec));
  return ok_status();
}

}  // namespace edgelm::tools
