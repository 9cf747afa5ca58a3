// The default search space of `edgelm optimize` and where its files go.
#pragma once

#include <string>
#include <vector>

namespace edgelm::tools::optimize {

// `<yaml folder>/<yaml stem>-<quant>.gguf`: where the quantized model of a candidate is written.
std::string quantized_model_path(const std::string& output_yaml, const std::string& quant);
// Quantizations searched by default: keep, then presets with fewer bits per weight than the
// given model's dominant type (`given`, e.g. "f32", "q8_0"). quick: keep, q8_0, q4_0.
std::vector<std::string> default_quant_space(const std::string& given, bool quick);
// Threads searched by default: quick: the hardware threads and half of them; else 1, 2, 4, ...
// below them, and them.
std::vector<int> default_thread_space(int hardware_threads, bool quick);

// Bits per weight of a stored type or preset name ("f16" 16, "q4_0" 4.5); unknown: 32.
double bits_per_weight(const std::string& type);

}  // namespace edgelm::tools::optimize
