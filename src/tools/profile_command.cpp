// `edgelm profile`: measures a model's latency profile on this machine (prefill time over input
// lengths, decode time per token over context lengths, through the batching engine), fits
// prefill = a·P² + b·P + c (P: the input padded to the detected or given granularity) and
// decode = t + s·context, prints the fit with its error on held-out lengths, and writes the
// profile JSON the server's router loads (serve/latency_model.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "format/model_file.h"
#include "model/model.h"
#include "serve/router_api.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct ProfileCmdOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string output;
  int threads = 0;
  std::string cpu_affinity;
  bool quick = false;
  int max_input = 0;      // 0: 256 quick, else min(1024, context/2)
  int decode_tokens = 0;  // 0: 16 quick, 32 full
  int reps = 0;           // 0: 1 quick, 3 full
  int n_prefill = 0;      // 0: 12 quick, 24 full
  int n_decode = 0;       // 0: 6 quick, 10 full
  int padding = 0;        // 0: detect
  int check = 0;          // held-out requests to compare with the predictions (0: 8 quick, 16)
  int check_output = 0;   // their longest output (0: the decode tokens)
  EngineFlags engine;
};

int run_profile(const ProfileCmdOptions& o) {
  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  auto file = format::open_model_file(o.model_path, o.tokenizer_path);
  if (!file.ok()) return report_error(file.error());
  auto loaded = model::Model::load(std::move(file).value());
  if (!loaded.ok()) return report_error(loaded.error());
  const model::Model& m = **loaded;
  auto eo = engine_options(o.engine);
  if (!eo.ok()) return report_error(eo.error());

  const int32_t n_ctx = m.config().n_ctx_train;
  const int32_t decode_tokens = o.decode_tokens > 0 ? o.decode_tokens : (o.quick ? 16 : 32);
  int32_t max_input = o.max_input > 0 ? o.max_input : (o.quick ? 256 : std::min(1024, n_ctx / 2));
  if (o.max_input == 0) max_input = std::min(max_input, n_ctx - decode_tokens - 2);
  serve::ProfileOptions po = serve::profile_plan(max_input, o.n_prefill > 0 ? o.n_prefill : (o.quick ? 12 : 24),
                                                 o.n_decode > 0 ? o.n_decode : (o.quick ? 6 : 10), decode_tokens,
                                                 o.reps > 0 ? o.reps : (o.quick ? 1 : 3));
  po.engine = *eo;
  po.engine.n_ctx = std::max(n_ctx, max_input + decode_tokens + 2);
  po.fit.padding = o.padding;
  po.progress = [](std::string_view line) {
    std::fprintf(stderr, "  %.*s\n", static_cast<int>(line.size()), line.data());
  };
  std::fprintf(stderr, "edgelm profile: %s, %d threads, inputs up to %d tokens, %d decode tokens per context\n",
               o.model_path.c_str(), pool.n_threads(), max_input, decode_tokens);

  engine::ModelRunner runner(m, pool);
  auto run = serve::run_latency_profile(runner, po);
  if (!run.ok()) return report_error(run.error());
  serve::LatencyModel& lm = run->model;
  lm.source = fmt::format("edgelm profile {}{}, {} threads", o.model_path, o.quick ? " --quick" : "", pool.n_threads());

  std::printf("model: %s (%d threads), measured in %.1f s\n", o.model_path.c_str(), pool.n_threads(), run->seconds);
  std::printf("prefill_ms(I) = %.4g*P^2 + %.4g*P + %.4g   (P = I padded to a multiple of %d)\n", lm.prefill_a,
              lm.prefill_b, lm.prefill_c, lm.padding);
  std::printf("decode_ms     = %.4g + %.4g*context   per token\n", lm.decode_t, lm.decode_s);
  for (const auto& [b, f] : lm.batch_factors)
    std::printf("decode beside %d other sequences: %.2fx the time per token\n", b - 1, f);
  std::printf("held-out error: prefill %.1f%%, decode %.1f%% (mean |predicted - measured| / measured)\n",
              100.0 * lm.held_out_prefill_error, 100.0 * lm.held_out_decode_error);
  std::printf("\n| input | measured ms | predicted ms | error |\n|---|---|---|---|\n");
  for (const auto& s : run->prefill) {
    const double p = lm.prefill_ms(s.n_input);
    std::printf("| %d | %.2f | %.2f | %+.1f%% |\n", s.n_input, s.ms, p, 100.0 * (p - s.ms) / s.ms);
  }
  std::printf("\n| context | measured ms/token | predicted | error |\n|---|---|---|---|\n");
  for (const auto& s : run->decode) {
    const double p = lm.decode_ms(s.context);
    std::printf("| %d | %.2f | %.2f | %+.1f%% |\n", s.context, s.ms, p, 100.0 * (p - s.ms) / s.ms);
  }
  // Whole requests of random lengths, none of them used by the fit.
  const int n_check = o.check > 0 ? o.check : (o.quick ? 8 : 16);
  const int32_t max_out = o.check_output > 0 ? o.check_output : decode_tokens;
  if (n_check > 0) {
    po.progress = nullptr;
    auto checks = serve::check_latency_model(runner, lm, po, n_check, max_input, max_out);
    if (!checks.ok()) return report_error(checks.error());
    std::printf("\n| held-out request (in + out) | measured ms | predicted ms | error |\n|---|---|---|---|\n");
    double sum = 0.0, worst = 0.0;
    for (const auto& c : *checks) {
      const double e = (c.predicted_ms - c.measured_ms) / c.measured_ms;
      sum += std::fabs(e);
      worst = std::max(worst, std::fabs(e));
      std::printf("| %d + %d | %.2f | %.2f | %+.1f%% |\n", c.n_input, c.n_output, c.measured_ms, c.predicted_ms,
                  100.0 * e);
    }
    std::printf("held-out requests: mean error %.1f%%, worst %.1f%% over %zu requests\n",
                100.0 * sum / static_cast<double>(checks->size()), 100.0 * worst, checks->size());
  }
  if (!o.output.empty()) {
    if (auto st = serve::save_latency_model(lm, o.output); !st.ok()) return report_error(st.error());
    std::printf("\nwrote %s\n", o.output.c_str());
  }
  return 0;
}

}  // namespace

CommandRunner add_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileCmdOptions>();
  CLI::App* cmd = app.add_subcommand("profile", "Measure and fit a model's latency profile (for the router)");
  cmd->add_option("-m,--model", o->model_path, "Model file")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("-o,--output", o->output, "Write the profile JSON here");
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  cmd->add_flag("--quick", o->quick, "Short profile: inputs up to 256, 16 decode tokens, 1 rep");
  cmd->add_option("--max-input", o->max_input, "Longest input to time (default 256 quick, else min(1024, ctx/2))")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decode-tokens", o->decode_tokens, "Decode tokens timed per context (default 16 quick, 32)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reps", o->reps, "Runs per length, median kept (default 1 quick, 3)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefill-points", o->n_prefill, "Input lengths to time (default 12 quick, 24)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decode-points", o->n_decode, "Context lengths to time decode at (default 6 quick, 10)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--padding", o->padding, "Input padding granularity (0: detect among 1..128)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--check", o->check, "Held-out requests of random lengths to check the fit on (default 8 quick, 16)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--check-output", o->check_output, "Longest output of a check request (default: --decode-tokens)")
      ->check(CLI::NonNegativeNumber);
  add_engine_options(cmd, o->engine);
  return [o] { return run_profile(*o); };
}

}  // namespace edgelm::tools
