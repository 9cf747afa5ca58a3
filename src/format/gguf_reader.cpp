#include "format/gguf_reader.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/mmap_file.h"

namespace edgelm::format {
namespace {

// Arrays may nest (arrays of arrays); real files use one level. The limit keeps recursion
// bounded on hostile input.
constexpr int kMaxArrayDepth = 8;
// Smallest encoding of one metadata entry: key length (8) + value type (4) + 1-byte value.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
// Smallest tensor info: name length (8) + n_dims (4) + type (4) + offset (8).
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

// Bounds-checked little-endian cursor over the file image. Every read either succeeds
// entirely or returns an error naming what was being read and where.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  Result<T> read(std::string_view what) {
    if (remaining() < sizeof(T)) return truncated(what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(std::string_view what) {
    EDGELM_TRY(const uint64_t len, read<uint64_t>(what));
    if (len > remaining()) {
      return make_error("{} at offset {}: string length {} exceeds the {} bytes left in the file", what,
                        pos_ - 8, len, remaining());
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  Error truncated(std::string_view what) const {
    return make_error("file truncated: {} at offset {} needs more than the {} bytes left", what, pos_,
                      remaining());
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Result<GgufValue> read_value(Cursor& c, GgufType type, const std::string& key, int depth);

Result<GgufValue> read_array(Cursor& c, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) return make_error("metadata '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
  EDGELM_TRY(const uint32_t raw_type, c.read<uint32_t>("array element type"));
  if (!gguf_type_valid(raw_type)) return make_error("metadata '{}': unknown array element type {}", key, raw_type);
  const auto elem_type = static_cast<GgufType>(raw_type);
  EDGELM_TRY(const uint64_t count, c.read<uint64_t>("array length"));
  // Every element takes at least one byte (strings 8, arrays 12), so a count above the bytes
  // left is corrupt; checking first keeps a hostile count from reserving gigabytes.
  size_t min_elem = gguf_scalar_size(elem_type);
  if (elem_type == GgufType::string) min_elem = 8;
  if (elem_type == GgufType::array) min_elem = 12;
  if (count > c.remaining() / min_elem) {
    return make_error("metadata '{}': array of {} {} elements does not fit in the {} bytes left (truncated or corrupt file)", key, count,
                      gguf_type_name(elem_type), c.remaining());
  }
  GgufValue::Array items;
  items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    EDGELM_TRY(GgufValue v, read_value(c, elem_type, key, depth + 1));
    items.push_back(std::move(v));
  }
  return GgufValue::from_array(elem_type, std::move(items));
}

Result<GgufValue> read_value(Cursor& c, GgufType type, const std::string& key, int depth) {
  switch (type) {
    case GgufType::u8: { EDGELM_TRY(auto v, c.read<uint8_t>(key)); return GgufValue::from_unsigned(type, v); }
    case GgufType::u16: { EDGELM_TRY(auto v, c.read<uint16_t>(key)); return GgufValue::from_unsigned(type, v); }
    case GgufType::u32: { EDGELM_TRY(auto v, c.read<uint32_t>(key)); return GgufValue::from_unsigned(type, v); }
    case GgufType::u64: { EDGELM_TRY(auto v, c.read<uint64_t>(key)); return GgufValue::from_unsigned(type, v); }
    case GgufType::i8: { EDGELM_TRY(auto v, c.read<int8_t>(key)); return GgufValue::from_signed(type, v); }
    case GgufType::i16: { EDGELM_TRY(auto v, c.read<int16_t>(key)); return GgufValue::from_signed(type, v); }
    case GgufType::i32: { EDGELM_TRY(auto v, c.read<int32_t>(key)); return GgufValue::from_signed(type, v); }
    case GgufType::i64: { EDGELM_TRY(auto v, c.read<int64_t>(key)); return GgufValue::from_signed(type, v); }
    case GgufType::f32: { EDGELM_TRY(auto v, c.read<float>(key)); return GgufValue::from_float(type, v); }
    case GgufType::f64: { EDGELM_TRY(auto v, c.read<double>(key)); return GgufValue::from_float(type, v); }
    case GgufType::boolean: {
      EDGELM_TRY(auto v, c.read<uint8_t>(key));
      if (v > 1) return make_error("metadata '{}': bool value {} is neither 0 nor 1", key, v);
      return GgufValue::from_bool(v != 0);
    }
    case GgufType::string: { EDGELM_TRY(auto s, c.read_string(key)); return GgufValue::from_string(std::move(s)); }
    case GgufType::array: return read_array(c, key, depth);
  }
  return make_error("metadata '{}': unknown value type {}", key, static_cast<uint32_t>(type));
}

Status read_metadata(Cursor& c, uint64_t n_kv, GgufMetadata& md) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    EDGELM_TRY(std::string key, c.read_string("metadata key"));
    if (md.contains(key)) return make_error("metadata key '{}' appears twice", key);
    EDGELM_TRY(const uint32_t raw_type, c.read<uint32_t>("metadata value type"));
    if (!gguf_type_valid(raw_type)) return make_error("metadata '{}': unknown value type {}", key, raw_type);
    EDGELM_TRY(GgufValue v, read_value(c, static_cast<GgufType>(raw_type), key, 0));
    md.set(std::move(key), std::move(v));
  }
  return ok_status();
}

Result<TensorInfo> read_tensor_info(Cursor& c) {
  TensorInfo t;
  EDGELM_TRY(t.name, c.read_string("tensor name"));
  EDGELM_TRY(const uint32_t n_dims, c.read<uint32_t>("tensor dimension count"));
  if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxDims))
    return make_error("tensor '{}': {} dimensions (supported: 1 to {})", t.name, n_dims, kMaxDims);
  t.n_dims = static_cast<int>(n_dims);
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    EDGELM_TRY(const uint64_t ne, c.read<uint64_t>("tensor dimension"));
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return make_error("tensor '{}': dimension {} has invalid size {}", t.name, d, ne);
    t.ne[d] = static_cast<int64_t>(ne);
    if (__builtin_mul_overflow(n_elements, t.ne[d], &n_elements))
      return make_error("tensor '{}': element count overflows", t.name);
  }
  EDGELM_TRY(const uint32_t raw_type, c.read<uint32_t>("tensor type"));
  const auto traits = dtype_traits(raw_type);
  if (!traits) return make_error("tensor '{}' has unknown tensor type {}", t.name, raw_type);
  t.type = traits->type;
  if (t.ne[0] % traits->block_size != 0) {
    return make_error("tensor '{}': row length {} is not a multiple of the {} block size {}", t.name, t.ne[0],
                      traits->name, traits->block_size);
  }
  const uint64_t n_blocks = static_cast<uint64_t>(n_elements) / traits->block_size;
  if (__builtin_mul_overflow(n_blocks, uint64_t{traits->type_size}, &t.n_bytes))
    return make_error("tensor '{}': byte size overflows", t.name);
  EDGELM_TRY(t.offset, c.read<uint64_t>("tensor data offset"));
  return t;
}

// The metadata and tensor infos were copied out by parse_gguf (strings, arrays); their pages of
// the read-only file mapping are dropped from this process (MADV_DONTNEED on a mapping never
// written re-reads the file should anything touch them again). A 262k-token vocabulary is 8 MB
// of header that otherwise stays resident.
void release_header_pages(const MappedFile& mapped, const ModelFile& file) {
  const uint8_t* end = mapped.data() + mapped.size();
  for (const TensorInfo& t : file.tensors) end = std::min(end, t.data);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = static_cast<size_t>(end - mapped.data()) / page * page;  // whole pages before any tensor
  if (bytes > 0) madvise(const_cast<uint8_t*>(mapped.data()), bytes, MADV_DONTNEED);
}

}  // namespace

Result<ModelFile> parse_gguf(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive) {
  Cursor c(data, size);
  EDGELM_TRY(const uint32_t magic, c.read<uint32_t>("magic"));
  if (magic != kGgufMagic) return make_error("not a GGUF file (bad magic 0x{:08x})", magic);
  ModelFile file;
  EDGELM_TRY(file.version, c.read<uint32_t>("version"));
  if (file.version != 2 && file.version != 3)
    return make_error("unsupported GGUF version {} (supported: 2, 3)", file.version);
  EDGELM_TRY(const uint64_t n_tensors, c.read<uint64_t>("tensor count"));
  EDGELM_TRY(const uint64_t n_kv, c.read<uint64_t>("metadata count"));
  if (n_kv > c.remaining() / kMinKvBytes)
    return make_error("metadata count {} cannot fit in a {}-byte file", n_kv, size);
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    return make_error("tensor count {} cannot fit in a {}-byte file", n_tensors, size);

  EDGELM_TRY_STATUS(read_metadata(c, n_kv, file.metadata));

  if (const GgufValue* a = file.metadata.find("general.alignment")) {
    const auto v = a->as_uint();
    if (a->type() != GgufType::u32 || !v || *v == 0 || (*v & (*v - 1)) != 0 || *v > (1u << 20))
      return make_error("general.alignment must be a power-of-two u32, got {}", a->to_display_string());
    file.alignment = static_cast<uint32_t>(*v);
  } else {
    file.alignment = kGgufDefaultAlignment;
  }

  file.tensors.reserve(static_cast<size_t>(n_tensors));
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    EDGELM_TRY(TensorInfo t, read_tensor_info(c));
    if (!names.insert(t.name).second) return make_error("tensor '{}' appears twice", t.name);
    file.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the infos.
  const uint64_t align = file.alignment;
  const uint64_t data_start = (c.pos() + align - 1) / align * align;
  if (n_tensors > 0 && data_start > size)
    return make_error("file truncated: data section would start at {} but the file has {} bytes", data_start, size);
  const uint64_t data_size = data_start <= size ? size - data_start : 0;
  for (TensorInfo& t : file.tensors) {
    if (t.offset % align != 0)
      return make_error("tensor '{}': data offset {} is not a multiple of the alignment {}", t.name, t.offset, align);
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return make_error("file truncated: tensor '{}' needs bytes [{}, {}) of a {}-byte data section", t.name,
                        t.offset, t.offset + t.n_bytes, data_size);
    }
    t.data = data + data_start + t.offset;
    // general.alignment may be 1 or 2, but the kernels read a tensor's blocks in place, whose
    // fields are fp16 and float: a tensor must start on a 4-byte boundary (every file llama.cpp
    // or gguf-py writes does, at 32).
    if (reinterpret_cast<uintptr_t>(t.data) % kTensorDataAlign != 0)
      return make_error("tensor '{}': its data (offset {}, general.alignment {}) does not start on a {}-byte boundary",
                        t.name, t.offset, align, kTensorDataAlign);
  }
  if (keep_alive) file.keep_alive(std::move(keep_alive));
  return file;
}

Result<ModelFile> read_gguf(const std::string& path, const LoadOptions& options) {
  EDGELM_TRY(MappedFile mapped, MappedFile::open(path, options.no_mmap ? FileAccess::read : FileAccess::map));
  auto shared = std::make_shared<MappedFile>(std::move(mapped));
  auto parsed = parse_gguf(shared->data(), shared->size(), shared);
  if (!parsed.ok()) return make_error("{}: {}", path, parsed.error().message);
  if (shared->maps_file()) {
    release_header_pages(*shared, *parsed);
    parsed->set_file_mapping(shared->data(), shared->size());
  }
  return parsed;
}

}  // namespace edgelm::format
