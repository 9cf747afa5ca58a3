// Images of chat requests (see image_input.h).
#include "serve/image_input.h"

#include <algorithm>

#include "core/timer.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "serve/sha256.h"

namespace edgelm::serve {
namespace {

constexpr std::string_view kStartOfImage = "<start_of_image>";
constexpr std::string_view kEndOfImage = "<end_of_image>";
constexpr std::string_view kSoftToken = "<image_soft_token>";

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<std::string> base64_decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (const char ch : in) {
    const int v = base64_value(static_cast<unsigned char>(ch));
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

ImageInput::ImageInput(ImageInputOptions opts, std::unique_ptr<vision::VisionEncoder> enc)
    : opts_(std::move(opts)), encoder_(std::move(enc)), pool_(std::max(1, opts_.threads)) {}

Result<std::unique_ptr<ImageInput>> ImageInput::open(const ImageInputOptions& opts) {
  if (opts.max_pixels < 1) return make_error("--image-max-pixels must be >= 1, got {}", opts.max_pixels);
  if (opts.max_images < 1) return make_error("--max-images-per-request must be >= 1, got {}", opts.max_images);
  if (opts.cache_entries < 0) return make_error("--image-cache must be >= 0, got {}", opts.cache_entries);
  auto enc = vision::VisionEncoder::open(opts.mmproj_path);
  if (!enc.ok()) return make_error("--mmproj '{}': {}", opts.mmproj_path, enc.error().message);
  return std::unique_ptr<ImageInput>(new ImageInput(opts, std::move(enc).value()));
}

Status ImageInput::check_model(const model::ModelConfig& c) const {
  const vision::VisionConfig& v = encoder_->config();
  if (c.arch->name != "gemma3")
    return make_error("--mmproj: the model's architecture '{}' takes no images (a {} projector feeds gemma3)",
                      c.arch->name, vision::projector_name(v.projector));
  if (v.projection_dim != c.n_embd)
    return make_error("--mmproj '{}' projects to {} values per token but the model's n_embd is {}: not its encoder",
                      opts_.mmproj_path, v.projection_dim, c.n_embd);
  return ok_status();
}

Status ImageInput::check_vocab(const tokenizer::Vocab& vocab) const {
  for (const std::string_view t : {kStartOfImage, kEndOfImage, kSoftToken})
    if (!vocab.find(t))
      return make_error("the model's vocabulary has no '{}' token, which Gemma 3 image input needs", t);
  return ok_status();
}

std::shared_ptr<const std::vector<float>> ImageInput::cache_get(const std::string& key) {
  std::lock_guard lock(cache_mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ImageInput::cache_put(const std::string& key, std::shared_ptr<const std::vector<float>> embd) {
  if (opts_.cache_entries == 0) return;
  std::lock_guard lock(cache_mutex_);
  if (index_.count(key) != 0) return;
  lru_.emplace_front(key, std::move(embd));
  index_[key] = lru_.begin();
  while (static_cast<int>(lru_.size()) > opts_.cache_entries) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

Result<EncodedImage> ImageInput::encode_url(std::string_view url) {
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0)
    return make_error("only data: URLs are supported (edgelm serves offline and does not fetch remote images)");
  if (url.rfind("data:", 0) != 0) return make_error("the image URL must be a data: URL (data:image/png;base64,...)");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return make_error("the data: URL has no ',' before its data");
  const std::string_view header = url.substr(5, comma - 5);
  if (header.size() < 7 || header.substr(header.size() - 7) != ";base64")
    return make_error("the data: URL must be base64-encoded (data:image/...;base64,...)");
  const std::string_view media_type = header.substr(0, header.find(';'));
  if (media_type.rfind("image/", 0) != 0)
    return make_error("the data: URL's media type is '{}', not an image/* type", media_type);
  auto bytes = base64_decode(url.substr(comma + 1));
  if (!bytes) return make_error("the data: URL's data is not valid base64");
  if (bytes->empty()) return make_error("the image is empty");

  EncodedImage out;
  Sha256 sha;
  sha.update(bytes->data(), bytes->size());
  out.sha256 = sha.hex_digest();
  out.hash = std::stoull(out.sha256.substr(0, 16), nullptr, 16);
  if (auto hit = cache_get(out.sha256)) {
    out.embd = std::move(hit);
    out.cached = true;
    return out;
  }
  Stopwatch watch;
  media::DecodeLimits limits;
  limits.max_pixels = opts_.max_pixels;
  auto image = media::decode_image(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), limits);
  if (!image.ok()) return make_error("the image cannot be decoded: {}", image.error().message);
  const vision::VisionConfig& v = encoder_->config();
  media::Gemma3Params params;
  params.image_size = v.image_size;
  params.norm.mean = v.image_mean;
  params.norm.std = v.image_std;
  const media::ImageTensor chw = media::preprocess_gemma3(*image, params);
  out.decode_s = watch.seconds();
  auto embd = std::make_shared<std::vector<float>>(static_cast<size_t>(encoder_->n_output_tokens()) *
                                                   static_cast<size_t>(encoder_->n_embd_out()));
  {
    std::lock_guard lock(encode_mutex_);
    Stopwatch enc_watch;
    const Status st = encoder_->encode(chw.chw.data(), *embd, pool_, scratch_);
    if (!st.ok()) return make_error("the image cannot be encoded: {}", st.error().message);
    out.encode_s = enc_watch.seconds();
  }
  out.embd = embd;
  cache_put(out.sha256, std::move(embd));
  return out;
}

Result<std::string> ImageInput::expand_markers(const std::string& text, size_t n_images) const {
  std::string form = "\n\n";
  form += kStartOfImage;
  for (int i = 0; i < encoder_->n_output_tokens(); ++i) form += kSoftToken;
  form += kEndOfImage;
  form += "\n\n";
  std::string out;
  size_t n = 0, pos = 0;
  for (;;) {
    const size_t at = text.find(kImageMarker, pos);
    if (at == std::string::npos) break;
    out.append(text, pos, at - pos);
    out += form;
    pos = at + kImageMarker.size();
    ++n;
  }
  out.append(text, pos);
  if (n != n_images)
    return make_error(
        "the rendered prompt holds {} image markers for {} images (the chat template dropped an image, or a text "
        "part contains '{}')",
        n, n_images, kImageMarker);
  return out;
}

Result<std::vector<engine::PromptImage>> ImageInput::locate(const std::vector<int32_t>& prompt,
                                                            const tokenizer::Vocab& vocab,
                                                            const std::vector<EncodedImage>& images) const {
  EDGELM_TRY_STATUS(check_vocab(vocab));
  const int32_t soft = *vocab.find(kSoftToken);
  const int32_t n_per = encoder_->n_output_tokens();
  std::vector<engine::PromptImage> out;
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != soft) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < prompt.size() && prompt[j] == soft) ++j;
    if (static_cast<int64_t>(j - i) != n_per || out.size() >= images.size())
      return make_error(
          "the prompt holds a run of {} '{}' tokens where each of the {} images needs {} (the text may contain the "
          "token itself)",
          j - i, kSoftToken, images.size(), n_per);
    engine::PromptImage im;
    im.pos0 = static_cast<int32_t>(i);
    im.n_tokens = n_per;
    im.embd = images[out.size()].embd;
    im.hash = images[out.size()].hash;
    out.push_back(std::move(im));
    i = j;
  }
  if (out.size() != images.size())
    return make_error("the prompt holds {} images' tokens for {} images", out.size(), images.size());
  return out;
}

}  // namespace edgelm::serve
