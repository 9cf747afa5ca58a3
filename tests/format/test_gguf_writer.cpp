// GGUF writer: byte-exact round trips and the atomic-write guarantee.
#include <gtest/gtest.h>

#include <filesystem>

#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "support/test_data.h"

namespace edgelm::format {
namespace {

// Writing a file we read from the reference implementation reproduces it byte for byte:
// same metadata order and types, same tensor layout and alignment padding.
TEST(GgufWriter, RoundTripOfReferenceFileIsByteExact) {
  for (const char* name : {"models/stories260K-f32.gguf", "models/stories260K-f16.gguf",
                           "models/interop/rand-small-Q4_K_M.gguf"}) {
    const std::string path = test::shared_path(name);
    auto f = read_gguf(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    test::TempDir dir;
    const std::string out = dir.file("out.gguf");
    auto st = write_gguf(out, *f);
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(test::read_file(out), test::read_file(path)) << name;
  }
}

TEST(GgufWriter, RoundTripOfEveryValueTypeAndAlignment) {
  ModelFile f;
  f.alignment = 64;
  f.metadata.set("general.architecture", GgufValue::from_string("llama"));
  f.metadata.set("a.u64", GgufValue::from_u64(1ull << 50));
  f.metadata.set("a.i32", GgufValue::from_i32(-7));
  f.metadata.set("a.f32", GgufValue::from_f32(0.25f));
  f.metadata.set("a.bool", GgufValue::from_bool(true));
  f.metadata.set("a.i8", GgufValue::from_signed(GgufType::i8, -3));
  f.metadata.set("a.f64", GgufValue::from_float(GgufType::f64, 1e300));
  GgufValue::Array inner{GgufValue::from_u32(1), GgufValue::from_u32(2)};
  f.metadata.set("a.nested", GgufValue::from_array(GgufType::array, {GgufValue::from_array(GgufType::u32, inner)}));
  std::vector<float> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;
  TensorInfo t;
  t.name = "w";
  t.n_dims = 2;
  t.ne = {4, 6, 1, 1};
  t.n_bytes = data.size() * sizeof(float);
  t.data = reinterpret_cast<const uint8_t*>(data.data());
  f.tensors.push_back(t);
  t.name = "w2";
  t.n_dims = 1;
  t.ne = {3, 1, 1, 1};
  t.n_bytes = 12;
  f.tensors.push_back(t);

  test::TempDir dir;
  ASSERT_TRUE(write_gguf(dir.file("x.gguf"), f).ok());
  auto g = read_gguf(dir.file("x.gguf"));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->alignment, 64u);
  EXPECT_EQ(*g->metadata.find("a.u64")->as_uint(), 1ull << 50);
  EXPECT_EQ(g->metadata.find("a.i8")->type(), GgufType::i8);
  EXPECT_EQ(*g->metadata.find("a.f64")->as_double(), 1e300);
  EXPECT_EQ(*(*g->metadata.find("a.nested")->as_array())[0].as_array()->at(1).as_uint(), 2u);
  ASSERT_EQ(g->tensors.size(), 2u);
  EXPECT_EQ(g->tensors[1].offset % 64, 0u);
  EXPECT_EQ(std::memcmp(g->tensors[0].data, data.data(), 96), 0);
  EXPECT_EQ(std::memcmp(g->tensors[1].data, data.data(), 12), 0);
}

TEST(GgufWriter, RejectsInconsistentTensorsAndLeavesNoFile) {
  ModelFile f;
  std::vector<float> data(4);
  TensorInfo t;
  t.name = "w";
  t.n_dims = 1;
  t.ne = {4, 1, 1, 1};
  t.n_bytes = 8;  // 4 floats need 16
  t.data = reinterpret_cast<const uint8_t*>(data.data());
  f.tensors.push_back(t);
  test::TempDir dir;
  auto st = write_gguf(dir.file("bad.gguf"), f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("'w'"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf.tmp")));
  // An unwritable destination is an error naming it.
  auto st2 = write_gguf("/nonexistent-dir/x.gguf", ModelFile{});
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.error().message.find("/nonexistent-dir/x.gguf"), std::string::npos);
}

}  // namespace
}  // namespace edgelm::format
