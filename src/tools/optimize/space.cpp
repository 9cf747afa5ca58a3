#include "tools/optimize/space.h"

#include <filesystem>
#include <map>

namespace edgelm::tools::optimize {

namespace fs = std::filesystem;

double bits_per_weight(const std::string& type) {
  static const std::map<std::string, double> bpw = {{"f32", 32},      {"f16", 16},    {"bf16", 16},  {"q8_0", 8.5},
                                                    {"q6_k", 6.5625}, {"q5_1", 6},    {"q5_0", 5.5}, {"q5_k", 5.5},
                                                    {"q5_k_m", 5.7},  {"q4_1", 5},    {"q4_k", 4.5}, {"q4_k_m", 4.9},
                                                    {"q4_0", 4.5},    {"q3_k", 3.44}, {"q2_k", 2.63}};
  auto it = bpw.find(type);
  return it == bpw.end() ? 32 : it->second;
}

std::string quantized_model_path(const std::string& output_yaml, const std::string& quant) {
  const fs::path p(output_yaml);
  return (p.parent_path() / (p.stem().string() + "-" + quant + ".gguf")).string();
}

std::vector<std::string> default_quant_space(const std::string& given, bool quick) {
  const std::vector<std::string> all =
      quick ? std::vector<std::string>{"q8_0", "q4_0"}
            : std::vector<std::string>{"f16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"};
  std::vector<std::string> out = {"keep"};
  for (const std::string& q : all)
    if (bits_per_weight(q) < bits_per_weight(given)) out.push_back(q);
  return out;
}

std::vector<int> default_thread_space(int hw, bool quick) {
  std::vector<int> out;
  if (quick) {
    if (hw / 2 >= 1 && hw / 2 != hw) out.push_back(hw / 2);
    out.push_back(hw);
    return out;
  }
  for (int t = 1; t < hw; t *= 2) out.push_back(t);
  out.push_back(hw);
  return out;
}

}  // namespace edgelm::tools::optimize
