#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/check.h"

namespace edgelm {
namespace {

constexpr std::array kTraits = {
    DTypeTraits{DType::f32, "F32", 1, 4},        DTypeTraits{DType::f16, "F16", 1, 2},
    DTypeTraits{DType::q4_0, "Q4_0", 32, 18},    DTypeTraits{DType::q4_1, "Q4_1", 32, 20},
    DTypeTraits{DType::q5_0, "Q5_0", 32, 22},    DTypeTraits{DType::q5_1, "Q5_1", 32, 24},
    DTypeTraits{DType::q8_0, "Q8_0", 32, 34},    DTypeTraits{DType::q8_1, "Q8_1", 32, 36},
    DTypeTraits{DType::q2_k, "Q2_K", 256, 84},   DTypeTraits{DType::q3_k, "Q3_K", 256, 110},
    DTypeTraits{DType::q4_k, "Q4_K", 256, 144},  DTypeTraits{DType::q5_k, "Q5_K", 256, 176},
    DTypeTraits{DType::q6_k, "Q6_K", 256, 210},  DTypeTraits{DType::q8_k, "Q8_K", 256, 292},
    DTypeTraits{DType::iq2_xxs, "IQ2_XXS", 256, 66}, DTypeTraits{DType::iq2_xs, "IQ2_XS", 256, 74},
    DTypeTraits{DType::iq3_xxs, "IQ3_XXS", 256, 98}, DTypeTraits{DType::iq1_s, "IQ1_S", 256, 50},
    DTypeTraits{DType::iq4_nl, "IQ4_NL", 32, 18},    DTypeTraits{DType::iq3_s, "IQ3_S", 256, 110},
    DTypeTraits{DType::iq2_s, "IQ2_S", 256, 82},     DTypeTraits{DType::iq4_xs, "IQ4_XS", 256, 136},
    DTypeTraits{DType::i8, "I8", 1, 1},          DTypeTraits{DType::i16, "I16", 1, 2},
    DTypeTraits{DType::i32, "I32", 1, 4},        DTypeTraits{DType::i64, "I64", 1, 8},
    DTypeTraits{DType::f64, "F64", 1, 8},        DTypeTraits{DType::iq1_m, "IQ1_M", 256, 56},
    DTypeTraits{DType::bf16, "BF16", 1, 2},      DTypeTraits{DType::tq1_0, "TQ1_0", 256, 54},
    DTypeTraits{DType::tq2_0, "TQ2_0", 256, 66}, DTypeTraits{DType::mxfp4, "MXFP4", 32, 17},
    DTypeTraits{DType::nvfp4, "NVFP4", 64, 36},
};

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t raw_type) {
  for (const auto& t : kTraits)
    if (static_cast<uint32_t>(t.type) == raw_type) return t;
  return std::nullopt;
}

const DTypeTraits& dtype_traits(DType type) {
  for (const auto& t : kTraits)
    if (t.type == type) return t;
  EDGELM_CHECK(false, "dtype without traits: ", static_cast<uint32_t>(type));
  __builtin_unreachable();
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTraits) {
    if (t.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == t.name[i];
    if (same) return t.type;
  }
  return std::nullopt;
}

}  // namespace edgelm
