// `edgelm run`: generate a continuation of a prompt and stream it to stdout.
// stdout carries only the generated text; load time, token counts, speeds and peak RSS go to
// stderr, so the output can be piped or compared byte for byte.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/byte_size.h"
#include "core/sys_stats.h"
#include "engine/generator.h"
#include "kernels/isa.h"
#include "schema/json_schema_grammar.h"
#include "tools/cli_images.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct RunOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string prompt;
  std::string prompt_file;
  int threads = 0;
  std::string cpu_affinity;
  bool quiet = false;
  std::string kv_type = "f16";
  std::string kv_memory;  // empty: what the context needs
  engine::GenerateOptions gen;
  std::string grammar, grammar_file, json_schema, json_schema_file;  // constrained output
  SpecFlags spec;
  format::LoadOptions load;
  std::vector<std::string> images;  // --image: before the prompt text (needs --mmproj)
  std::string mmproj;
};

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read {} file '{}'", what, path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --grammar / --grammar-file (GBNF) or --json-schema / --json-schema-file, compiled.
Status load_grammar(RunOptions& o) {
  if (!o.grammar_file.empty()) {
    EDGELM_TRY(o.grammar, read_file(o.grammar_file, "grammar"));
  }
  if (!o.json_schema_file.empty()) {
    EDGELM_TRY(o.json_schema, read_file(o.json_schema_file, "JSON Schema"));
  }
  std::string gbnf = o.grammar;
  if (!o.json_schema.empty()) {
    // ordered_json: properties in the order the file gives them.
    const nlohmann::ordered_json schema =
        nlohmann::ordered_json::parse(o.json_schema, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return make_error("--json-schema: not valid JSON");
    Result<std::string> g = schema::json_schema_to_gbnf(schema);
    if (!g.ok()) return make_error("--json-schema: {}", g.error().message);
    gbnf = std::move(*g);
  }
  if (gbnf.empty()) return ok_status();
  Result<grammar::GrammarPtr> g = grammar::parse_gbnf(gbnf);
  if (!g.ok()) return make_error("--grammar: {}", g.error().message);
  o.gen.grammar = *g;
  return ok_status();
}

int run(RunOptions& o) {
  if (!o.prompt_file.empty()) {
    auto text = read_file(o.prompt_file, "prompt");
    if (!text.ok()) return report_error(text.error());
    o.prompt = std::move(*text);
  }
  if (auto st = load_grammar(o); !st.ok()) return report_error(st.error());
  if (!o.images.empty() && o.mmproj.empty())
    return report_error(make_error("--image needs --mmproj FILE (the model's vision encoder, an mmproj GGUF)"));
  for (const std::string& path : o.images)  // a missing file fails before the model loads
    if (auto bytes = read_image_file(path); !bytes.ok()) return report_error(bytes.error());
  auto kv_type = kv::kv_type_from_name(o.kv_type);
  if (!kv_type.ok()) return report_error(kv_type.error());
  o.gen.kv_type = *kv_type;
  if (!o.kv_memory.empty()) {
    auto bytes = parse_byte_size(o.kv_memory);
    if (!bytes.ok()) return report_error(bytes.error());
    o.gen.kv_memory_bytes = *bytes;
  }
  auto lm = engine::load_model(o.model_path, o.tokenizer_path, o.load);
  if (!lm.ok()) return report_error(lm.error());
  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  engine::DraftModel draft;
  if (auto st = engine::configure_speculation(o.spec, *lm->model, o.tokenizer_path, pool, o.gen.spec, draft, o.load);
      !st.ok())
    return report_error(st.error());

  if (!o.mmproj.empty()) {
    auto in = open_cli_images(o.mmproj, *lm, pool.n_threads(), 0, o.gen.n_batch);
    if (!in.ok()) return report_error(in.error());
    auto images = encode_image_files(**in, o.images);
    if (!images.ok()) return report_error(images.error());
    if (auto st = set_image_prompt(**in, *lm, o.prompt, *images, o.gen); !st.ok()) return report_error(st.error());
    if (!o.quiet)
      for (size_t i = 0; i < images->size(); ++i)
        std::fprintf(stderr, "image %zu: %s | decode: %.1f ms | encode: %.1f ms | %zu frame(s)\n", i,
                     o.images[i].c_str(), (*images)[i].decode_s * 1e3, (*images)[i].encode_s * 1e3,
                     (*images)[i].embd->frames.size());
  }

  bool wrote = false;
  auto on_text = [&wrote](std::string_view text) {
    wrote = true;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  auto stats = engine::generate(*lm, o.prompt, o.gen, pool, on_text);
  if (wrote) std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!stats.ok()) return report_error(stats.error());
  const auto& s = *stats;
  if (s.ctx_extended) {
    std::fprintf(stderr, "edgelm: warning: context extended to %d tokens, past the %d the model was trained with\n",
                 s.n_ctx, lm->model->config().n_ctx_train);
  }
  if (!o.quiet) {
    const double prefill_tps = s.prefill_seconds > 0 ? s.n_prompt / s.prefill_seconds : 0.0;
    const double decode_tps = s.decode_seconds > 0 && s.n_generated > 1 ? (s.n_generated - 1) / s.decode_seconds : 0.0;
    std::fprintf(stderr,
                 "load time: %.1f ms | prompt tokens: %d | prefill: %.1f tok/s | generated: %d | decode: %.1f tok/s"
                 " | finish: %s | threads: %d | isa: %s | peak RSS: %.1f MiB\n",
                 lm->load_seconds * 1e3, s.n_prompt, prefill_tps, s.n_generated, decode_tps,
                 std::string(engine::finish_reason_name(s.finish)).c_str(), pool.n_threads(),
                 std::string(kernels::isa_name(kernels::active_isa())).c_str(),
                 static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0));
    if (o.gen.spec.mode != engine::SpecMode::off) {
      std::fprintf(stderr, "speculative (%s): %lld of %lld draft tokens accepted (%.1f%%)\n",
                   o.gen.spec.mode == engine::SpecMode::ngram ? "prompt lookup"
                   : o.gen.spec.mode == engine::SpecMode::mtp       ? "MTP head"
                   : o.gen.spec.mode == engine::SpecMode::assistant ? "Gemma 4 assistant"
                                                               : "draft model",
                   static_cast<long long>(s.n_accepted), static_cast<long long>(s.n_draft),
                   s.n_draft > 0 ? 100.0 * static_cast<double>(s.n_accepted) / static_cast<double>(s.n_draft) : 0.0);
    }
  }
  return 0;
}

}  // namespace

CommandRunner add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a continuation of a prompt, streamed to stdout");
  cmd->add_option("-m,--model", o->model_path, "Model file: GGUF, or a llama2.c checkpoint (.bin)")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", o->gen.n_predict, "Exact number of tokens to generate (fewer only at EOS)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", o->gen.n_ctx, "Context size in tokens (0: the model's, extended to fit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch-size", o->gen.n_batch, "Prompt tokens per forward pass")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f16, f32 or q8_0")->capture_default_str();
  cmd->add_option("--kv-memory", o->kv_memory, "KV cache pool size, e.g. 256M (default: what the context needs)");
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  add_spec_options(cmd, o->spec);
  add_model_load_options(cmd, o->load);
  cmd->add_flag(
      "--ignore-eos", [o](int64_t) { o->gen.stop_at_eos = false; }, "Keep generating after EOS");
  auto& s = o->gen.sampling;
  cmd->add_option("--temp", s.temperature, "Temperature; <= 0 is greedy")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Top-k; <= 0 is off")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Top-p (nucleus); 1 is off")->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Min-p; 0 is off")->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty; 1 is off")->capture_default_str();
  cmd->add_option("--repeat-last-n", s.penalty_last_n, "Penalty window; 0 off, -1 whole history")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty, "Presence penalty; 0 is off")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty; 0 is off")->capture_default_str();
  cmd->add_option("-s,--seed", s.seed, "Random seed (fixed seed: reproducible output)")->capture_default_str();
  cmd->add_flag("--dyn-temp", s.dyn_temp.enabled, "Lower the temperature as the input grows (off by default)");
  cmd->add_option("--dyn-temp-min", s.dyn_temp.min_temperature, "Dynamic temperature floor")->capture_default_str();
  cmd->add_option("--dyn-temp-start", s.dyn_temp.start_tokens, "Input length where lowering starts")
      ->capture_default_str();
  cmd->add_option("--dyn-temp-full", s.dyn_temp.full_tokens, "Input length where the floor is reached")
      ->capture_default_str();
  auto* g1 = cmd->add_option("--grammar", o->grammar, "Constrain the output to this GBNF grammar (root rule 'root')");
  auto* g2 = cmd->add_option("--grammar-file", o->grammar_file, "Read the GBNF grammar from a file")->excludes(g1);
  auto* g3 = cmd->add_option("--json-schema", o->json_schema, "Constrain the output to JSON valid against this schema")
                 ->excludes(g1)
                 ->excludes(g2);
  cmd->add_option("--json-schema-file", o->json_schema_file, "Read the JSON Schema from a file")
      ->excludes(g1)
      ->excludes(g2)
      ->excludes(g3);
  cmd->add_option("--image", o->images, "Image file (PNG, JPEG, WebP) placed before the prompt text; repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--mmproj", o->mmproj, "Vision encoder of the model (mmproj GGUF), for --image");
  cmd->add_flag("-q,--quiet", o->quiet, "Do not print statistics on stderr");
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
