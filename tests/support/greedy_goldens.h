// The greedy goldens of ../shared/golden/greedy.json (stories260K): prompt, tokens to predict and
// the exact text, shared by every test that checks a load path against them.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_data.h"

namespace edgelm::test {

struct GoldenCase {
  std::string prompt;
  int n_predict;
  std::string text;
};

inline std::vector<GoldenCase> load_cases() {
  std::ifstream in(shared_path("golden/greedy.json"));
  const auto j = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& c : j.at("cases")) cases.push_back({c.at("prompt"), c.at("n_predict"), c.at("text")});
  return cases;
}

}  // namespace edgelm::test
