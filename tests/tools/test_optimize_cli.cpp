// `edgelm optimize --quick` end to end on stories260K (trained weights, so KLD means something):
// a reachable SLA writes a YAML that `serve --config` starts and that meets the SLA with a wide
// margin in a short `loadtest`; an impossible SLA names the binding constraint and the closest
// candidate; a rerun over an edited state file re-measures only what the state lacks; bad --sla
// items are errors naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "server/serve_process.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::test {
namespace {

ProcessResult edgelm(std::vector<std::string> args, int timeout_s = 170) {
  args.insert(args.begin(), EDGELM_BIN);
  return run_process(args, timeout_s);
}

std::string stories() { return shared_path("models/stories260K-f32.gguf"); }

// The value of a "key: value" line of a YAML file ("" when absent), quotes removed.
std::string yaml_value(const std::string& yaml, const std::string& key) {
  std::istringstream in(yaml);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ": ", 0) != 0) continue;
    std::string v = line.substr(key.size() + 2);
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    return v;
  }
  return "";
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

TEST(OptimizeCli, ReachableSlaWritesAConfigThatServesTheSla) {
  TempDir dir;
  const std::string yaml = dir.file("edgelm.yaml");
  const ProcessResult r = edgelm({"optimize", "-m", stories(), "--sla",
                                  "p95_ms<=2000,ttft_p95_ms<=1000,qps>=4,kld<=0.5,rss<=1G", "--quick", "-o", yaml});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("winner: "), std::string::npos) << r.out;
  // Every stage ran and pruned nothing it should not have.
  EXPECT_FALSE(lines_with(r.err, "[quality] q8_0").empty()) << r.err;
  EXPECT_FALSE(lines_with(r.err, "[bench]").empty());
  EXPECT_FALSE(lines_with(r.err, "[sweep]").empty());
  EXPECT_GE(lines_with(r.err, "[load]").size(), 2u);  // the top candidates, then batch limits (qps given)

  const std::string config = read_file(yaml);
  const std::string model = yaml_value(config, "model_path");
  ASSERT_FALSE(model.empty()) << config;
  EXPECT_TRUE(std::filesystem::path(model).is_absolute()) << model;
  EXPECT_TRUE(std::filesystem::exists(model)) << model;
  if (!std::filesystem::equivalent(model, stories())) {
    EXPECT_EQ(std::filesystem::path(model).parent_path(), std::filesystem::path(dir.path()));
  }
  for (const char* key : {"threads", "kv_type", "kv_memory", "max_batch_size", "max_batch_tokens", "target_step_ms"})
    EXPECT_FALSE(yaml_value(config, key).empty()) << key << "\n" << config;

  const std::string report = read_file(dir.file("edgelm.report.md"));
  for (const char* part : {"## Every candidate measured", "| # | stage | quant |", "**winner**", "## Pareto front",
                           "## Device preset for this CPU", "edgelm.report.svg", "CPU-s/token", "energy: "})
    EXPECT_NE(report.find(part), std::string::npos) << part;
  EXPECT_EQ(read_file(dir.file("edgelm.report.svg")).rfind("<svg", 0), 0u);
  EXPECT_TRUE(std::filesystem::exists(yaml + ".state.json"));
  EXPECT_FALSE(std::filesystem::exists(yaml + ".work"));  // candidate configs are cleaned up

  // The YAML alone starts the server (the port is overridden only to get a free one).
  serve::ServeProcess server({"--config", yaml, "--port", "0"});
  const int port = server.wait_ready();
  ASSERT_GT(port, 0) << server.log();
  const ProcessResult lt = edgelm({"loadtest", "--url", "http://127.0.0.1:" + std::to_string(port), "--qps", "4",
                                   "--duration", "3", "--max-tokens", "32", "--json"});
  ASSERT_EQ(lt.exit_code, 0) << lt.err;
  const nlohmann::json j = nlohmann::json::parse(lt.out);
  EXPECT_GT(j["requests"]["sent"].get<int>(), 0);
  EXPECT_EQ(j["requests"]["ok"], j["requests"]["sent"]) << lt.out;
  EXPECT_TRUE(j["errors"].empty()) << lt.out;
  // A wide margin: a quarter of each latency limit.
  EXPECT_LT(j["latency_s"]["e2e"]["p95"].get<double>(), 2.0 / 4) << lt.out;
  EXPECT_LT(j["latency_s"]["ttft"]["p95"].get<double>(), 1.0 / 4) << lt.out;
  const auto rss = j["server"]["process_resident_memory_bytes"];
  if (!rss.is_null()) {
    EXPECT_LT(rss.get<double>(), 1024.0 * 1024 * 1024 / 4);
  }
}

TEST(OptimizeCli, ImpossibleSlaNamesTheBindingConstraintAndTheClosestCandidate) {
  TempDir dir;
  const std::string yaml = dir.file("edgelm.yaml");
  const ProcessResult r =
      edgelm({"optimize", "-m", stories(), "--sla", "p95_ms<=0.001,kld<=0.5", "--quick", "-o", yaml});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("edgelm: error: no candidate meets the SLA: the binding constraint is p95_ms<=0.001"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("the closest candidate is "), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(with p95_ms [0-9.e+-]+ predicted \([0-9.]+x the limit\))")))
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(yaml));  // no config that misses the SLA
  const std::string report = read_file(dir.file("edgelm.report.md"));
  EXPECT_NE(report.find("**No candidate meets the SLA.** Binding constraint: `p95_ms<=0.001`"), std::string::npos)
      << report;
  // Nothing quantized is left behind without a winner.
  EXPECT_FALSE(std::filesystem::exists(dir.file("edgelm-q8_0.gguf")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("edgelm-q4_0.gguf")));
}

TEST(OptimizeCli, ResumesFromTheStateWithoutRemeasuringFinishedCandidates) {
  TempDir dir;
  const std::string yaml = dir.file("edgelm.yaml");
  const std::vector<std::string> args = {"optimize",
                                         "-m",
                                         stories(),
                                         "--sla",
                                         "p95_ms<=5000,kld<=1",
                                         "--quick",
                                         "--quant-types",
                                         "keep,q8_0",
                                         "--threads",
                                         "1",
                                         "--load-seconds",
                                         "2",
                                         "-o",
                                         yaml};
  const ProcessResult first = edgelm(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;

  // Edit the state as an interrupted run would have left it: the load tests not done yet, and a
  // finished quality row with a value no measurement gives, to see it reused as it is.
  const std::string state_path = yaml + ".state.json";
  nlohmann::json state = nlohmann::json::parse(read_file(state_path));
  size_t removed = 0;
  for (auto it = state["measurements"].begin(); it != state["measurements"].end();) {
    if (it.key().rfind("load/", 0) == 0) {
      it = state["measurements"].erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  ASSERT_GT(removed, 0u);
  ASSERT_TRUE(state["measurements"].contains("quality/q8_0"));
  state["measurements"]["quality/q8_0"]["ppl"] = 9.87654;
  write_file(state_path, state.dump());

  const ProcessResult second = edgelm(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("resumed from " + state_path), std::string::npos) << second.err;
  for (const char* stage : {"[quality]", "[bench]", "[sweep]"}) {
    const auto lines = lines_with(second.err, stage);
    EXPECT_FALSE(lines.empty()) << stage;
    for (const std::string& line : lines) EXPECT_NE(line.find("(reused)"), std::string::npos) << line;
  }
  EXPECT_EQ(second.err.find("evaluating the reference"), std::string::npos) << second.err;
  const auto loads = lines_with(second.err, "[load]");
  EXPECT_EQ(loads.size(), removed);
  for (const std::string& line : loads) EXPECT_EQ(line.find("(reused)"), std::string::npos) << line;
  EXPECT_NE(second.err.find(std::to_string(removed) + " measurement(s) new"), std::string::npos) << second.err;
  EXPECT_NE(read_file(dir.file("edgelm.report.md")).find("| 9.877 |"), std::string::npos);

  // A third run measures nothing at all.
  const ProcessResult third = edgelm(args);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_NE(third.err.find("0 measurement(s) new"), std::string::npos) << third.err;
}

TEST(OptimizeCli, ABudgetTooSmallStillEndsWithOneMeasurementPerStage) {
  TempDir dir;
  const std::string yaml = dir.file("edgelm.yaml");
  const ProcessResult r = edgelm({"optimize", "-m", stories(), "--sla", "p95_ms<=5000", "--quick", "--budget-minutes",
                                  "0.001", "--load-seconds", "1", "-o", yaml});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_with(r.err, "[quality]").size(), 1u) << r.err;  // keep only
  EXPECT_EQ(lines_with(r.err, "[bench]").size(), 1u) << r.err;
  EXPECT_TRUE(lines_with(r.err, "[sweep]").empty()) << r.err;
  EXPECT_EQ(lines_with(r.err, "[load]").size(), 1u) << r.err;  // the first load test always runs
  EXPECT_NE(read_file(dir.file("edgelm.report.md")).find("the time budget ran out"), std::string::npos);
  EXPECT_TRUE(
      std::filesystem::equivalent(yaml_value(read_file(yaml), "model_path"), stories()));  // keep: the given file
}

TEST(OptimizeCli, BadInputsAreErrorsNamingThem) {
  TempDir dir;
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"optimize", "-m", stories(), "-o", dir.file("x.yaml")};
    args.insert(args.end(), extra.begin(), extra.end());
    return edgelm(args, 30);
  };
  auto expect_error = [](const ProcessResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("edgelm: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  };
  expect_error(run({"--sla", "p99_ms<=800"}), "unknown key 'p99_ms'");
  expect_error(run({"--sla", "qps<=20"}), "qps takes '>='");
  expect_error(run({"--sla", "kld<=lots"}), "kld: 'lots' is not a number");
  expect_error(run({"--prefer", "speed"}), "--prefer: 'speed'");
  expect_error(run({"--quant-types", "q9_9"}), "--quant-types");
  expect_error(run({"--threads", "0"}), "--threads");
  expect_error(run({"--workload", dir.file("missing.txt")}), "missing.txt");
  expect_error(edgelm({"optimize", "-m", dir.file("none.gguf"), "-o", dir.file("x.yaml")}), "none.gguf");
  expect_error(edgelm({"optimize", "-m", stories(), "-o", dir.file("x.txt")}), "should be a .yaml file");
}

}  // namespace
}  // namespace edgelm::test
