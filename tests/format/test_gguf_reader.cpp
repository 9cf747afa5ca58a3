// GGUF reader: real files from the reference implementation, every metadata type, and the
// corruptions a hostile or damaged file can carry (each must be a clear error, never a crash).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "format/gguf_builder.h"
#include "format/gguf_reader.h"
#include "support/test_data.h"

namespace edgelm::format {
namespace {

using test::GgufBytes;

Result<ModelFile> parse(const GgufBytes& b) { return parse_gguf(b.bytes().data(), b.size()); }

std::string error_of(const GgufBytes& b) {
  auto r = parse(b);
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.error().message;
}

TEST(GgufReader, ReadsReferenceStories260K) {
  auto f = read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 32u);
  EXPECT_EQ(*f->metadata.get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->metadata.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->metadata.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_FLOAT_EQ(*f->metadata.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  const auto* tokens = *f->metadata.get_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ(*(*tokens)[1].as_string(), "<s>");
  EXPECT_EQ(f->tensors.size(), 48u);
  const TensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::f32);
  EXPECT_EQ(q->ne[0], 64);
  EXPECT_EQ(q->ne[1], 64);
  EXPECT_EQ(q->n_bytes, 64u * 64u * 4u);
}

TEST(GgufReader, ReadsEveryInteropAndVocabFile) {
  for (const char* name : {"models/stories260K-f16.gguf", "models/interop/rand-small-f32.gguf",
                           "models/interop/rand-small-Q4_K_M.gguf", "models/interop/rand-small-Q6_K.gguf",
                           "models/interop/rand-small-BF16.gguf", "models/interop/rand-small-Q5_1.gguf",
                           "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-bert-bge.gguf",
                           "vocab/ggml-vocab-deepseek-llm.gguf"}) {
    auto f = read_gguf(test::shared_path(name));
    EXPECT_TRUE(f.ok()) << name << ": " << (f.ok() ? "" : f.error().message);
  }
}

// The header (metadata, tensor infos) is copied out while parsing, so read_gguf drops its pages of
// the file mapping: none of a 4 MB vocabulary file's whole pages is mapped afterwards.
TEST(GgufReader, HeaderPagesAreReleasedAfterParsing) {
  const std::string path = edgelm::test::shared_path("vocab/ggml-vocab-deepseek-llm.gguf");
  auto f = read_gguf(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_TRUE(f->metadata.contains("tokenizer.ggml.tokens"));  // the copies are intact
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uintptr_t lo = 0, hi = 0;
  while (std::getline(maps, line))
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0) {
      std::istringstream in(line);
      char dash = 0;
      in >> std::hex >> lo >> dash >> hi;
      break;
    }
  ASSERT_NE(lo, 0u) << "no mapping of " << path;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = (hi - lo) / page;
  ASSERT_GT(n, 100u);
  // mincore() would report the page cache; the process's own page table says what it maps.
  const int fd = open("/proc/self/pagemap", O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<uint64_t> v(n);
  const ssize_t got = pread(fd, v.data(), n * sizeof(uint64_t), static_cast<off_t>(lo / page * sizeof(uint64_t)));
  close(fd);
  ASSERT_EQ(got, static_cast<ssize_t>(n * sizeof(uint64_t)));
  size_t resident = 0;
  for (size_t i = 0; i + 1 < n; ++i) resident += v[i] >> 63;  // the last, partial page may stay
  EXPECT_EQ(resident, 0u) << "of " << n << " pages";
}

TEST(GgufReader, AllMetadataTypesIncludingNestedArrays) {
  GgufBytes b;
  b.header(0, 14);
  b.str("u8").u32(0).pod<uint8_t>(200);
  b.str("i8").u32(1).pod<int8_t>(-5);
  b.str("u16").u32(2).pod<uint16_t>(60000);
  b.str("i16").u32(3).pod<int16_t>(-30000);
  b.str("u32").u32(4).u32(4000000000u);
  b.str("i32").u32(5).pod<int32_t>(-2000000000);
  b.str("f32").u32(6).pod<float>(1.5f);
  b.str("bool").u32(7).pod<uint8_t>(1);
  b.str("string").u32(8).str("héllo");
  b.str("u64").u32(10).u64(1ull << 40);
  b.str("i64").u32(11).pod<int64_t>(-(1ll << 40));
  b.str("f64").u32(12).pod<double>(-2.25);
  b.str("strings").u32(9).u32(8).u64(2).str("a").str("bc");
  // array of 2 arrays of i32: [[1, 2], [3]]
  b.str("nested").u32(9).u32(9).u64(2).u32(5).u64(2).pod<int32_t>(1).pod<int32_t>(2).u32(5).u64(1).pod<int32_t>(3);
  auto f = parse(b);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto& md = f->metadata;
  EXPECT_EQ(*md.find("u8")->as_uint(), 200u);
  EXPECT_EQ(*md.find("i8")->as_int(), -5);
  EXPECT_EQ(*md.find("u16")->as_uint(), 60000u);
  EXPECT_EQ(*md.find("i16")->as_int(), -30000);
  EXPECT_EQ(*md.get_u32("u32"), 4000000000u);
  EXPECT_EQ(*md.find("i32")->as_int(), -2000000000);
  EXPECT_EQ(*md.get_f32("f32"), 1.5f);
  EXPECT_TRUE(*md.get_bool("bool"));
  EXPECT_EQ(*md.get_string("string"), "héllo");
  EXPECT_EQ(*md.find("u64")->as_uint(), 1ull << 40);
  EXPECT_EQ(*md.find("i64")->as_int(), -(1ll << 40));
  EXPECT_EQ(*md.find("f64")->as_double(), -2.25);
  EXPECT_EQ(md.find("i8")->type(), GgufType::i8);
  const auto* strings = *md.get_array("strings");
  ASSERT_EQ(strings->size(), 2u);
  EXPECT_EQ(*(*strings)[1].as_string(), "bc");
  const auto* nested = *md.get_array("nested");
  ASSERT_EQ(nested->size(), 2u);
  EXPECT_EQ(md.find("nested")->array_type(), GgufType::array);
  EXPECT_EQ((*nested)[0].as_array()->size(), 2u);
  EXPECT_EQ(*(*(*nested)[1].as_array())[0].as_int(), 3);
  // Typed getters name the key on a type mismatch; a negative value is no u32.
  EXPECT_NE(md.get_u32("string").error().message.find("'string'"), std::string::npos);
  EXPECT_FALSE(md.get_u32("i8").ok());
  EXPECT_NE(md.get_u32("absent").error().message.find("missing"), std::string::npos);
}

TEST(GgufReader, Version2AndAlignmentAndTensorData) {
  GgufBytes b;
  b.header(2, 1, 2).str("general.alignment").u32(4).u32(64);
  b.tensor("a", {4}, 0, 0).tensor("b", {2, 2}, 0, 64);
  b.pad_to(64);
  const size_t data_start = b.size();
  for (int i = 0; i < 4; ++i) b.pod<float>(static_cast<float>(i));
  b.pad_to(64);
  for (int i = 0; i < 4; ++i) b.pod<float>(10.0f + static_cast<float>(i));
  auto f = parse(b);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version, 2u);
  EXPECT_EQ(f->alignment, 64u);
  ASSERT_EQ(f->tensors.size(), 2u);
  EXPECT_EQ(f->tensors[0].data, b.bytes().data() + data_start);
  float v;
  std::memcpy(&v, f->tensors[1].data + 12, sizeof v);
  EXPECT_EQ(v, 13.0f);
}

TEST(GgufReader, RejectsCorruptHeaders) {
  EXPECT_NE(error_of(GgufBytes().u32(0x12345678).u32(3).u64(0).u64(0)).find("bad magic"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().header(0, 0, 1)).find("version 1"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().header(0, 0, 4)).find("version 4"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().header(1ull << 60, 0)).find("tensor count"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().header(0, ~0ull)).find("metadata count"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().u32(0x46554747).u32(3)).find("truncated"), std::string::npos);
}

TEST(GgufReader, RejectsCorruptMetadata) {
  // string length far beyond the file
  EXPECT_NE(error_of(GgufBytes().header(0, 1).u64(1ull << 62).zeros(16)).find("exceeds"), std::string::npos);
  // unknown value type
  EXPECT_NE(error_of(GgufBytes().header(0, 1).str("k").u32(13)).find("unknown value type 13"), std::string::npos);
  // array count that cannot fit: must fail fast, not allocate
  EXPECT_NE(error_of(GgufBytes().header(0, 1).str("k").u32(9).u32(4).u64(1ull << 61)).find("does not fit"),
            std::string::npos);
  // arrays nested 100 deep
  GgufBytes deep;
  deep.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 100; ++i) deep.u32(9).u64(1);
  EXPECT_NE(error_of(deep).find("nested"), std::string::npos);
  // duplicate key
  EXPECT_NE(error_of(GgufBytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2)).find("twice"), std::string::npos);
  // bool that is not 0/1
  EXPECT_NE(error_of(GgufBytes().header(0, 1).str("b").u32(7).pod<uint8_t>(7)).find("bool"), std::string::npos);
  // alignment that is not a power of two, zero, or of the wrong type
  EXPECT_NE(error_of(GgufBytes().header(0, 1).kv_u32("general.alignment", 48)).find("alignment"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().header(0, 1).kv_u32("general.alignment", 0)).find("alignment"), std::string::npos);
  EXPECT_NE(error_of(GgufBytes().header(0, 1).kv_str("general.alignment", "32")).find("alignment"), std::string::npos);
}

TEST(GgufReader, RejectsCorruptTensorInfos) {
  auto one = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data_bytes) {
    GgufBytes b;
    b.header(1, 0).tensor("t", std::move(dims), type, offset).pad_to(32).zeros(data_bytes);
    return error_of(b);
  };
  EXPECT_NE(one({}, 0, 0, 64).find("0 dimensions"), std::string::npos);
  EXPECT_NE(one({1, 1, 1, 1, 1}, 0, 0, 64).find("5 dimensions"), std::string::npos);
  EXPECT_NE(one({0}, 0, 0, 64).find("invalid size"), std::string::npos);
  EXPECT_NE(one({1ull << 32, 1ull << 32}, 0, 0, 64).find("overflow"), std::string::npos);
  EXPECT_NE(one({1ull << 40, 1ull << 30}, 0, 0, 64).find("overflow"), std::string::npos);
  EXPECT_NE(one({16}, 200, 0, 64).find("unknown tensor type 200"), std::string::npos);
  EXPECT_NE(one({16}, 4, 0, 64).find("unknown tensor type 4"), std::string::npos);   // removed Q4_2
  EXPECT_NE(one({33}, 8, 0, 64).find("block size"), std::string::npos);             // Q8_0 row of 33
  EXPECT_NE(one({4}, 0, 8, 64).find("not a multiple of the alignment"), std::string::npos);
  EXPECT_NE(one({16}, 0, 0, 32).find("truncated"), std::string::npos);               // 64 bytes needed
  EXPECT_NE(one({4}, 0, ~0ull - 31, 64).find("truncated"), std::string::npos);        // offset near 2^64
  GgufBytes dup;
  dup.header(2, 0).tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32).pad_to(32).zeros(64);
  EXPECT_NE(error_of(dup).find("twice"), std::string::npos);
}

// general.alignment 1 lets a tensor start at any byte, but the kernels read quant blocks in place
// (fp16 and float fields): a tensor that does not start on a 4-byte boundary is refused, naming
// it; one that does loads (found by fuzz_gguf: a Q3_K tensor at an odd address).
TEST(GgufReader, RejectsTensorDataOffTheFourByteBoundary) {
  auto file = [](uint64_t offset) {
    GgufBytes b;
    b.header(1, 1).kv_u32("general.alignment", 1).tensor("t", {4}, 0, offset);
    return b;
  };
  const size_t data_start = file(0).size();  // alignment 1: the data follows the infos at once
  for (const uint64_t skew : {0u, 1u, 2u, 3u}) {
    const uint64_t offset = (4 - data_start % 4) % 4 + skew;
    GgufBytes b = file(offset);
    b.zeros(static_cast<size_t>(offset) + 16);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(b.bytes().data()) % 16, 0u);  // operator new's alignment
    auto f = parse(b);
    if (skew == 0) {
      ASSERT_TRUE(f.ok()) << f.error().message;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensors[0].data) % 4, 0u);
    } else {
      ASSERT_FALSE(f.ok()) << "skew " << skew;
      EXPECT_NE(f.error().message.find("tensor 't'"), std::string::npos) << f.error().message;
      EXPECT_NE(f.error().message.find("4-byte boundary"), std::string::npos) << f.error().message;
    }
  }
}

// Every prefix of a valid file must parse as an error (or, for the full file, succeed):
// never crash, hang, or read out of bounds (ASan checks the last).
TEST(GgufReader, EveryTruncationIsAnError) {
  GgufBytes b;
  b.header(2, 4).kv_str("general.architecture", "llama").kv_u32("x", 7);
  b.str("arr").u32(9).u32(8).u64(3).str("a").str("bb").str("ccc");
  b.str("nested").u32(9).u32(9).u64(1).u32(6).u64(2).pod<float>(1).pod<float>(2);
  b.tensor("w", {8, 2}, 1, 0).tensor("v", {8}, 0, 32).pad_to(32);
  const size_t data_end = b.size() + 64;
  b.zeros(64);
  ASSERT_TRUE(parse(b).ok());
  for (size_t n = 0; n < b.size(); ++n) {
    auto r = parse_gguf(b.bytes().data(), n);
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " of " << data_end << " bytes parsed";
  }
}

TEST(GgufReader, EveryTruncationOfARealFileIsAnError) {
  const std::string bytes = test::read_file(test::shared_path("models/stories260K-f16.gguf"));
  ASSERT_GT(bytes.size(), 100000u);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n_checked = 0;
  // Every byte of the header and metadata, then a stride through the tensor data.
  for (size_t n = 0; n + 1 < bytes.size(); n += (n < 16384 ? 1 : 4093)) {
    EXPECT_FALSE(parse_gguf(p, n).ok()) << "prefix of " << n << " bytes parsed";
    ++n_checked;
  }
  EXPECT_GT(n_checked, 16000u);
  EXPECT_TRUE(parse_gguf(p, bytes.size()).ok());
}

TEST(GgufReader, MissingAndNonGgufFiles) {
  auto missing = read_gguf("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/model.gguf"), std::string::npos);
  auto wrong = read_gguf(test::shared_path("models/tok512.bin"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("not a GGUF file"), std::string::npos);
  test::TempDir dir;
  test::write_file(dir.file("empty.gguf"), "");
  EXPECT_FALSE(read_gguf(dir.file("empty.gguf")).ok());
}

}  // namespace
}  // namespace edgelm::format
