#include "format/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "format/gguf_reader.h"

namespace edgelm::format {
namespace {

// Buffered binary output over stdio with sticky error state.
class Out {
 public:
  explicit Out(std::FILE* f) : f_(f) {}
  void bytes(const void* p, size_t n) {
    if (ok_ && n > 0 && std::fwrite(p, 1, n, f_) != n) ok_ = false;
    written_ += n;
  }
  template <typename T>
  void pod(T v) { bytes(&v, sizeof v); }
  void string(std::string_view s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t align) {
    static const uint8_t zeros[64] = {};
    uint64_t n = (align - written_ % align) % align;
    while (n > 0) {
      const size_t k = n < sizeof zeros ? static_cast<size_t>(n) : sizeof zeros;
      bytes(zeros, k);
      n -= k;
    }
  }
  bool ok() const { return ok_; }
  uint64_t written() const { return written_; }

 private:
  std::FILE* f_;
  bool ok_ = true;
  uint64_t written_ = 0;
};

void write_value(Out& out, const GgufValue& v) {
  switch (v.type()) {
    case GgufType::u8: out.pod<uint8_t>(static_cast<uint8_t>(*v.as_uint())); break;
    case GgufType::u16: out.pod<uint16_t>(static_cast<uint16_t>(*v.as_uint())); break;
    case GgufType::u32: out.pod<uint32_t>(static_cast<uint32_t>(*v.as_uint())); break;
    case GgufType::u64: out.pod<uint64_t>(*v.as_uint()); break;
    case GgufType::i8: out.pod<int8_t>(static_cast<int8_t>(*v.as_int())); break;
    case GgufType::i16: out.pod<int16_t>(static_cast<int16_t>(*v.as_int())); break;
    case GgufType::i32: out.pod<int32_t>(static_cast<int32_t>(*v.as_int())); break;
    case GgufType::i64: out.pod<int64_t>(*v.as_int()); break;
    case GgufType::f32: out.pod<float>(static_cast<float>(*v.as_double())); break;
    case GgufType::f64: out.pod<double>(*v.as_double()); break;
    case GgufType::boolean: out.pod<uint8_t>(*v.as_bool() ? 1 : 0); break;
    case GgufType::string: out.string(*v.as_string()); break;
    case GgufType::array: {
      out.pod<uint32_t>(static_cast<uint32_t>(v.array_type()));
      out.pod<uint64_t>(v.as_array()->size());
      for (const GgufValue& item : *v.as_array()) write_value(out, item);
      break;
    }
  }
}

Status check_tensor(const TensorInfo& t) {
  const DTypeTraits& traits = dtype_traits(t.type);
  if (t.n_dims < 1 || t.n_dims > kMaxDims) return make_error("tensor '{}': {} dimensions", t.name, t.n_dims);
  if (t.ne[0] % traits.block_size != 0)
    return make_error("tensor '{}': row length {} is not a multiple of {}", t.name, t.ne[0], traits.block_size);
  const uint64_t expect = static_cast<uint64_t>(t.n_elements()) / traits.block_size * traits.type_size;
  if (t.n_bytes != expect)
    return make_error("tensor '{}': {} bytes given, {} {} needs {}", t.name, t.n_bytes, t.shape_string(), traits.name, expect);
  if (t.data == nullptr) return make_error("tensor '{}' has no data", t.name);
  return ok_status();
}

}  // namespace

Status write_gguf(const std::string& path, const ModelFile& file) {
  const uint64_t align = file.alignment;
  if (align == 0 || (align & (align - 1)) != 0) return make_error("alignment {} is not a power of two", align);
  for (const TensorInfo& t : file.tensors) EDGELM_TRY_STATUS(check_tensor(t));

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return make_error("cannot create '{}': {}", tmp, std::strerror(errno));
  Out out(f);

  // general.alignment is written only when it differs from the default, and then as u32.
  std::vector<const std::pair<std::string, GgufValue>*> kvs;
  for (const auto& kv : file.metadata.entries())
    if (kv.first != "general.alignment") kvs.push_back(&kv);
  const bool write_alignment = align != kGgufDefaultAlignment;

  out.pod<uint32_t>(kGgufMagic);
  out.pod<uint32_t>(3);
  out.pod<uint64_t>(file.tensors.size());
  out.pod<uint64_t>(kvs.size() + (write_alignment ? 1 : 0));
  if (write_alignment) {
    out.string("general.alignment");
    out.pod<uint32_t>(static_cast<uint32_t>(GgufType::u32));
    out.pod<uint32_t>(static_cast<uint32_t>(align));
  }
  for (const auto* kv : kvs) {
    out.string(kv->first);
    out.pod<uint32_t>(static_cast<uint32_t>(kv->second.type()));
    write_value(out, kv->second);
  }
  uint64_t offset = 0;
  for (const TensorInfo& t : file.tensors) {
    out.string(t.name);
    out.pod<uint32_t>(static_cast<uint32_t>(t.n_dims));
    for (int d = 0; d < t.n_dims; ++d) out.pod<uint64_t>(static_cast<uint64_t>(t.ne[d]));
    out.pod<uint32_t>(static_cast<uint32_t>(t.type));
    out.pod<uint64_t>(offset);
    offset += (t.n_bytes + align - 1) / align * align;
  }
  out.pad_to(align);
  for (const TensorInfo& t : file.tensors) {
    out.bytes(t.data, t.n_bytes);
    out.pad_to(align);
  }
  const bool flushed = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!out.ok() || !flushed || !closed) {
    const int err = errno;
    std::remove(tmp.c_str());
    return make_error("cannot write '{}': {}", path, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return make_error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err));
  }
  return ok_status();
}

}  // namespace edgelm::format
