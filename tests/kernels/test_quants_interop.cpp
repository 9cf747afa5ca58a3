// Format exactness against files written by the reference implementation
// (shared/models/interop): every tensor of every quantized file dequantizes to the reference's
// floats bit for bit (SHA-256 of the float32 bytes), and our quantizers, fed the original F32
// weights, reproduce the reference quantizer's bytes. Q2_K, Q3_K, IQ4_NL and IQ4_XS: recorded
// blocks of llama-quantize's files (lowbit_goldens.inc; a script read them with gguf-py's
// GGUFReader and took the expected floats from gguf.quants.dequantize; the same check over every
// tensor of those files and of TinyLlama-shape Q2_K / Q3_K_M files passed when recorded).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "format/gguf_reader.h"
#include "kernels/dequantize.h"
#include "quant_test_util.h"
#include "sha256_hex.h"
#include "support/test_data.h"

namespace edgelm::kernels {
namespace {

using format::ModelFile;
using format::TensorInfo;

#include "lowbit_goldens.inc"

std::string interop_path(const std::string& name) { return edgelm::test::shared_path("models/interop/" + name); }

using test::sha256_hex;

const nlohmann::json& hashes() {
  static const nlohmann::json j =
      nlohmann::json::parse(edgelm::test::read_file(interop_path("dequant-sha256.json"))).at("files");
  return j;
}

ModelFile open_or_die(const std::string& name) {
  auto f = format::read_gguf(interop_path(name));
  EXPECT_TRUE(f.ok()) << name << ": " << (f.ok() ? "" : f.error().message);
  return f.ok() ? std::move(*f) : ModelFile{};
}

std::vector<float> tensor_floats(const TensorInfo& t) { return test::dequantize(t.type, t.data, t.n_elements()); }

const std::vector<std::string> kQuantFiles = {
    "rand-small-F16.gguf",    "rand-small-BF16.gguf", "rand-small-Q8_0.gguf", "rand-small-Q4_0.gguf",
    "rand-small-Q4_1.gguf",   "rand-small-Q5_0.gguf", "rand-small-Q5_1.gguf", "rand-small-Q4_K_M.gguf",
    "rand-small-Q5_K_M.gguf", "rand-small-Q6_K.gguf",
};

// "rand-small-Q4_K_M.gguf" -> "Q4_K_M"
std::string file_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param.substr(std::strlen("rand-small-"));
  return s.substr(0, s.find('.'));
}

TEST(QuantInterop, HashFileCoversExactlyTheKnownFiles) {
  std::set<std::string> listed;
  for (const auto& [file, tensors] : hashes().items()) listed.insert(file);
  EXPECT_EQ(listed, std::set<std::string>(kQuantFiles.begin(), kQuantFiles.end()));
}

class DequantHash : public ::testing::TestWithParam<std::string> {};

TEST_P(DequantHash, EveryTensorMatchesReferenceBitForBit) {
  const std::string& file = GetParam();
  const nlohmann::json& expected = hashes().at(file);
  const ModelFile f = open_or_die(file);
  EXPECT_EQ(f.tensors.size(), expected.size()) << file;
  int n_ok = 0;
  for (const auto& [name, info] : expected.items()) {
    const TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr) << file << ": tensor " << name << " missing";
    const std::string type(dtype_name(t->type));
    const std::string where = file + " / " + name + " (" + type + ")";
    EXPECT_EQ(type, info.at("type").get<std::string>()) << where;
    std::vector<int64_t> shape(t->ne.begin(), t->ne.begin() + t->n_dims);
    EXPECT_EQ(shape, info.at("shape").get<std::vector<int64_t>>()) << where;
    ASSERT_TRUE(can_dequantize(t->type)) << where;
    std::vector<float> y(static_cast<size_t>(t->n_elements()));
    to_float(t->type, t->data, y.data(), t->n_elements());
    const bool ok = sha256_hex(y.data(), y.size() * sizeof(float)) == info.at("sha256").get<std::string>();
    EXPECT_TRUE(ok) << "dequantized floats differ from the reference: " << where;
    n_ok += ok;
  }
  EXPECT_EQ(n_ok, static_cast<int>(expected.size())) << file;
}

INSTANTIATE_TEST_SUITE_P(Interop, DequantHash, ::testing::ValuesIn(kQuantFiles), file_param_name);

// Our quantizers, fed the same F32 weights, must write the very bytes the reference quantizer
// wrote (it ran without an importance matrix). For the legacy formats and F16/BF16 this checks
// the rounding rules; for the K formats it checks that the scale search makes the same choices
// (same candidates, same float operation order), which also pins its error to the reference's.
class QuantizeBytes : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizeBytes, MatchReferenceQuantizerOnRealWeights) {
  const std::string& file = GetParam();
  const ModelFile src = open_or_die("rand-small-f32.gguf");
  const ModelFile ref = open_or_die(file);
  int n_checked = 0;
  for (const TensorInfo& t : ref.tensors) {
    if (t.type == DType::f32) continue;  // norms stay F32, nothing to quantize
    const std::string where = file + " / " + t.name + " (" + std::string(dtype_name(t.type)) + ")";
    const TensorInfo* s = src.find_tensor(t.name);
    ASSERT_NE(s, nullptr) << where;
    ASSERT_EQ(s->type, DType::f32) << where;
    ASSERT_EQ(s->n_elements(), t.n_elements()) << where;
    ASSERT_NE(quant_traits(t.type)->from_float, nullptr) << where;
    const std::vector<float> x(reinterpret_cast<const float*>(s->data),
                               reinterpret_cast<const float*>(s->data) + s->n_elements());
    const std::vector<uint8_t> q = test::quantize(t.type, x);
    ASSERT_EQ(q.size(), t.n_bytes) << where;
    const DTypeTraits& dt = dtype_traits(t.type);
    size_t n_diff = 0;
    for (size_t off = 0; off < q.size(); off += dt.type_size)
      n_diff += std::memcmp(q.data() + off, t.data + off, dt.type_size) != 0;
    if (n_diff != 0) {
      const std::vector<float> ours = test::dequantize(t.type, q.data(), t.n_elements());
      ADD_FAILURE() << where << ": " << n_diff << " of " << q.size() / dt.type_size
                    << " blocks differ from the reference quantizer; relative RMSE ours "
                    << test::relative_rmse(x, ours) << ", reference " << test::relative_rmse(x, tensor_floats(t));
    }
    ++n_checked;
  }
  EXPECT_GT(n_checked, 0) << file;
}

INSTANTIATE_TEST_SUITE_P(Interop, QuantizeBytes, ::testing::ValuesIn(kQuantFiles), file_param_name);

// The recorded blocks dequantize to gguf-py's floats bit for bit.
template <size_t kBytes, size_t kFloats>
void expect_golden(DType type, const uint8_t (&bytes)[kBytes], const uint32_t (&floats)[kFloats]) {
  SCOPED_TRACE(std::string(dtype_name(type)));
  ASSERT_EQ(dtype_row_bytes(type, kFloats), kBytes);
  const std::vector<float> got = test::dequantize(type, bytes, kFloats);
  int wrong = 0;
  for (size_t i = 0; i < kFloats; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &got[i], 4);
    if (bits != floats[i] && ++wrong <= 5) ADD_FAILURE() << "element " << i << ": " << got[i] << " bits " << bits;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(QuantInterop, LowBitBlocksMatchGgufPyBitForBit) {
  expect_golden(DType::q2_k, kQ2KGoldenBytes, kQ2KGoldenFloats);
  expect_golden(DType::q3_k, kQ3KGoldenBytes, kQ3KGoldenFloats);
  expect_golden(DType::iq4_nl, kIQ4NLGoldenBytes, kIQ4NLGoldenFloats);
  expect_golden(DType::iq4_xs, kIQ4XSGoldenBytes, kIQ4XSGoldenFloats);
}

}  // namespace
}  // namespace edgelm::kernels
