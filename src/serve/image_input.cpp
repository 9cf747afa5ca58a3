// Images of chat requests (see image_input.h).
#include "serve/image_input.h"

#include <algorithm>

#include "core/timer.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "serve/image_prompt.h"
#include "serve/sha256.h"

namespace edgelm::serve {
namespace {

// SmolVLM's Idefics3ImageProcessor: size.longest_edge = 4 x max_image_size.longest_edge (the tile).
constexpr int kIdefics3DefaultEdgeTiles = 4;
// qwen3vl: the fewest merged tokens of an image (Qwen3.5's preprocessor_config shortest_edge 65536 px at
// 32 px per merged token), kept for every patch size.
constexpr int kQwenVlMinTokens = 64;

// gemma4v: ik_llama.cpp's clip.cpp limits an image to between 252 and 280 soft tokens' worth of
// pixels (set_limit_image_tokens(252, 280)).
constexpr int64_t kGemma4vMinTokens = 252;
constexpr int64_t kGemma4vMaxTokens = 280;

// The prefix-KV key of frame f of an image whose key is h: distinct per frame, never 0 (0 asks
// the engine to hash the rows).
uint64_t frame_hash(uint64_t h, size_t f) {
  const uint64_t k = h ^ (0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(f) + 1));
  return k != 0 ? k : 1;
}

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

ImageInput::ImageInput(ImageInputOptions opts, std::unique_ptr<vision::VisionEncoder> enc, ImageSource source)
    : opts_(std::move(opts)),
      encoder_(std::move(enc)),
      source_(std::move(source)),
      pool_(std::max(1, opts_.threads)) {}

Result<std::unique_ptr<ImageInput>> ImageInput::open(const ImageInputOptions& opts) {
  if (opts.max_pixels < 1) return make_error("--image-max-pixels must be >= 1, got {}", opts.max_pixels);
  if (opts.max_images < 1) return make_error("--max-images-per-request must be >= 1, got {}", opts.max_images);
  if (opts.cache_entries < 0) return make_error("--image-cache must be >= 0, got {}", opts.cache_entries);
  EDGELM_TRY(ImageSource source, ImageSource::open(opts.source));
  auto enc = vision::VisionEncoder::open(opts.mmproj_path);
  if (!enc.ok()) return make_error("--mmproj '{}': {}", opts.mmproj_path, enc.error().message);
  return std::unique_ptr<ImageInput>(new ImageInput(opts, std::move(enc).value(), std::move(source)));
}

int ImageInput::longest_edge() const {
  const vision::VisionConfig& v = encoder_->config();
  if (v.projector != vision::ProjectorType::idefics3) return 0;
  return v.preproc_image_size > 0 ? v.preproc_image_size : kIdefics3DefaultEdgeTiles * v.image_size;
}

int ImageInput::max_grid() const {
  const int tile = encoder_->config().image_size;
  return longest_edge() == 0 ? 0 : (longest_edge() + tile - 1) / tile;
}

Status ImageInput::check_model(const model::ModelConfig& c) const {
  const vision::VisionConfig& v = encoder_->config();
  // The text architecture each projector feeds: Gemma 3's own, SmolVLM's SmolLM2 (llama), Gemma 4's
  // own, and Qwen3-VL's projector Qwen3.5 (qwen35, whose M-RoPE positions the images take).
  const std::string_view text_arch = v.projector == vision::ProjectorType::idefics3  ? "llama"
                                     : v.projector == vision::ProjectorType::gemma4v ? "gemma4"
                                     : v.projector == vision::ProjectorType::qwen3vl ? "qwen35"
                                                                                      : "gemma3";
  if (c.arch->name != text_arch)
    return make_error("--mmproj: the model's architecture '{}' takes no images (a {} projector feeds {})", c.arch->name,
                      vision::projector_name(v.projector), text_arch);
  if (v.projection_dim != c.n_embd)
    return make_error("--mmproj '{}' projects to {} values per token but the model's n_embd is {}: not its encoder",
                      opts_.mmproj_path, v.projection_dim, c.n_embd);
  return ok_status();
}

Status ImageInput::check_vocab(const tokenizer::Vocab& vocab) const {
  const vision::ProjectorType p = encoder_->config().projector;
  for (const std::string& t : image_prompt_tokens(p, max_grid()))
    if (!vocab.find(t))
      return make_error("the model's vocabulary has no '{}' token, which {} image input needs", t,
                        vision::projector_name(p));
  return ok_status();
}

Result<media::TiledTensors> ImageInput::preprocess(const media::Image& image) const {
  const vision::VisionConfig& v = encoder_->config();
  media::NormalizeParams norm;
  norm.mean = v.image_mean;
  norm.std = v.image_std;
  if (v.projector == vision::ProjectorType::idefics3) {
    media::Idefics3Params params;
    params.longest_edge = longest_edge();
    params.tile_size = v.image_size;
    params.norm = norm;
    return media::preprocess_idefics3(image, params);
  }
  if (v.projector == vision::ProjectorType::gemma4v) {
    media::QwenVlParams params;
    params.patch_size = v.patch_size;
    params.merge_size = v.n_merge;
    const int64_t cell = int64_t{v.patch_size} * v.n_merge;
    params.min_pixels = kGemma4vMinTokens * cell * cell;
    params.max_pixels = kGemma4vMaxTokens * cell * cell;
    params.norm = norm;
    EDGELM_TRY(media::ImageTensor frame, media::preprocess_qwen_vl(image, params));
    media::TiledTensors out;
    out.frames.push_back(std::move(frame));
    return out;
  }
  if (v.projector == vision::ProjectorType::qwen3vl) {
    media::QwenVlParams params;
    params.patch_size = v.patch_size;
    params.merge_size = v.n_merge;
    const int64_t per_token = int64_t{v.patch_size} * v.n_merge * v.patch_size * v.n_merge;
    const int max_tokens = opts_.max_image_tokens > 0
                               ? std::min(opts_.max_image_tokens, vision::VisionEncoder::kMaxDynamicTokens)
                               : vision::VisionEncoder::kMaxDynamicTokens;
    params.max_pixels = int64_t{max_tokens} * per_token;
    // At most a quarter of the cap, so that smart_resize's upward rounding of a small image stays
    // under it.
    params.min_pixels = std::max<int64_t>(1, std::min(kQwenVlMinTokens, max_tokens / 4)) * per_token;
    params.norm = norm;
    EDGELM_TRY(media::ImageTensor frame, media::preprocess_qwen_vl(image, params));
    media::TiledTensors out;
    out.frames.push_back(std::move(frame));
    return out;
  }
  media::Gemma3Params params;
  params.image_size = v.image_size;
  params.norm = norm;
  media::TiledTensors out;
  out.frames.push_back(media::preprocess_gemma3(image, params));
  return out;
}

std::shared_ptr<const ImageEmbeddings> ImageInput::cache_get(const std::string& key) {
  std::lock_guard lock(cache_mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ImageInput::cache_put(const std::string& key, std::shared_ptr<const ImageEmbeddings> embd) {
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

Result<FetchedImage> ImageInput::read_ref(const ImageRef& ref) {
  const std::string_view url = ref.text;
  if (ref.raw_base64 && url.rfind("data:", 0) != 0) {
    auto bytes = base64_decode(url);
    if (!bytes) return make_error("the image is neither base64 nor a data: URL");
    if (bytes->empty()) return make_error("the image is empty");
    FetchedImage got;
    got.bytes = std::move(*bytes);
    return got;
  }
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    EDGELM_TRY(FetchedImage got, source_.fetch_url(url));
    if (got.bytes.empty()) return make_error("the image URL's body is empty");
    return got;
  }
  if (url.rfind("file:", 0) == 0) {
    EDGELM_TRY(FetchedImage got, source_.read_file_url(url));
    if (got.bytes.empty()) return make_error("the image file is empty");
    got.content_type.clear();
    return got;
  }
  if (url.rfind("data:", 0) != 0)
    return make_error(
        "the image URL must be a data: URL (data:image/png;base64,...), or file:///PATH with --media-path, or "
        "http(s):// with --allow-image-urls");
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
  FetchedImage got;
  got.bytes = std::move(*bytes);
  return got;
}

Result<EncodedImage> ImageInput::encode_url(std::string_view url) {
  const ImageRef ref{url, false};
  EDGELM_TRY(std::vector<EncodedImage> out, encode_images(std::span(&ref, 1)));
  return std::move(out[0]);
}

Result<EncodedImage> ImageInput::encode_base64_or_url(std::string_view text) {
  const ImageRef ref{text, true};
  EDGELM_TRY(std::vector<EncodedImage> out, encode_images(std::span(&ref, 1)));
  return std::move(out[0]);
}

Result<EncodedImage> ImageInput::encode_bytes(const std::string& bytes) {
  EDGELM_TRY(std::unique_ptr<Pending> p, prepare(bytes));
  if (!p->out.cached) {
    Pending* one = p.get();
    encode_queued(std::span(&one, 1));
    if (p->error) return make_error("the image cannot be encoded: {}", *p->error);
  }
  return std::move(p->out);
}

Result<std::vector<EncodedImage>> ImageInput::encode_images(std::span<const ImageRef> refs, size_t* failed) {
  std::vector<FetchedImage> fetched;
  for (size_t i = 0; i < refs.size(); ++i) {
    if (failed != nullptr) *failed = i;
    EDGELM_TRY(FetchedImage got, read_ref(refs[i]));
    fetched.push_back(std::move(got));
  }
  return encode_fetched(fetched, failed);
}

Result<std::vector<EncodedImage>> ImageInput::encode_all_bytes(std::span<const std::string> bytes, size_t* failed) {
  std::vector<FetchedImage> fetched(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) fetched[i].bytes = bytes[i];
  return encode_fetched(fetched, failed);
}

Result<std::vector<EncodedImage>> ImageInput::encode_fetched(std::span<const FetchedImage> fetched, size_t* failed) {
  std::vector<std::unique_ptr<Pending>> pending;
  for (size_t i = 0; i < fetched.size(); ++i) {
    if (failed != nullptr) *failed = i;
    const FetchedImage& got = fetched[i];
    auto p = prepare(got.bytes);
    if (!p.ok()) {
      const std::string_view type = std::string_view(got.content_type).substr(0, got.content_type.find(';'));
      if (!got.content_type.empty() && type.rfind("image/", 0) != 0)
        return make_error("the image URL answered Content-Type '{}', not an image/* type, and its body {}", type,
                          std::string_view(p.error().message).substr(std::string_view("the image ").size()));
      return p.error();
    }
    pending.push_back(std::move(p).value());
  }
  // The images to encode; the same image again in this request shares the first one's result.
  std::vector<Pending*> todo;
  std::vector<std::pair<size_t, size_t>> repeats;  // (image, the earlier one it repeats)
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i]->out.cached) continue;
    size_t first = i;
    for (size_t j = 0; j < i && first == i; ++j)
      if (!pending[j]->out.cached && pending[j]->out.sha256 == pending[i]->out.sha256) first = j;
    if (first != i)
      repeats.emplace_back(i, first);
    else
      todo.push_back(pending[i].get());
  }
  if (!todo.empty()) encode_queued(todo);
  for (size_t i = 0; i < pending.size(); ++i)
    if (pending[i]->error) {
      if (failed != nullptr) *failed = i;
      return make_error("the image cannot be encoded: {}", *pending[i]->error);
    }
  for (const auto& r : repeats) {
    Pending& p = *pending[r.first];
    p.out.embd = pending[r.second]->out.embd;
    p.out.cached = true;
  }
  std::vector<EncodedImage> out;
  for (auto& p : pending) out.push_back(std::move(p->out));
  return out;
}

Result<std::unique_ptr<ImageInput::Pending>> ImageInput::prepare(const std::string& bytes) {
  if (bytes.size() > opts_.source.max_bytes)
    return make_error("the image has {} bytes, more than the {} an image may have (--image-max-bytes)", bytes.size(),
                      opts_.source.max_bytes);
  auto p = std::make_unique<Pending>();
  EncodedImage& out = p->out;
  Sha256 sha;
  sha.update(bytes.data(), bytes.size());
  out.sha256 = sha.hex_digest();
  out.hash = std::stoull(out.sha256.substr(0, 16), nullptr, 16);
  if (auto hit = cache_get(out.sha256)) {
    out.embd = std::move(hit);
    out.cached = true;
    return p;
  }
  Stopwatch watch;
  media::DecodeLimits limits;
  limits.max_pixels = opts_.max_pixels;
  limits.max_bytes = opts_.source.max_bytes;
  auto image = media::decode_image(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), limits);
  if (!image.ok()) return make_error("the image cannot be decoded: {}", image.error().message);
  auto tensors = preprocess(*image);
  if (!tensors.ok()) return make_error("the image cannot be preprocessed: {}", tensors.error().message);
  p->tensors = std::move(tensors).value();
  out.decode_s = watch.seconds();
  p->embd = std::make_shared<ImageEmbeddings>();
  ImageEmbeddings& embd = *p->embd;
  embd.rows = p->tensors.rows;
  embd.cols = p->tensors.cols;
  for (const media::ImageTensor& chw : p->tensors.frames) {
    if (const Status st = encoder_->check_size(chw.width, chw.height); !st.ok())
      return make_error("the image cannot be encoded: {}", st.error().message);
    embd.tokens_per_frame = encoder_->n_output_tokens(chw.width, chw.height);
    if (encoder_->config().projector == vision::ProjectorType::qwen3vl) {  // its merged grid, for M-RoPE
      const vision::VisionConfig& vc = encoder_->config();
      embd.grid_w = chw.width / (vc.patch_size * vc.n_merge);
      embd.grid_h = chw.height / (vc.patch_size * vc.n_merge);
    }
    auto frame = std::make_shared<std::vector<float>>(static_cast<size_t>(embd.tokens_per_frame) *
                                                      static_cast<size_t>(encoder_->n_embd_out()));
    p->outputs.push_back(frame);
    embd.frames.push_back(std::move(frame));
    p->patches += encoder_->n_patches(chw.width, chw.height);
  }
  return p;
}

ImageEncoderStats ImageInput::encoder_stats() const {
  std::lock_guard lock(queue_mutex_);
  ImageEncoderStats s = stats_;
  s.queued = static_cast<int>(queue_.size());
  s.encoding = encoding_;
  return s;
}

void ImageInput::encode_queued(std::span<Pending* const> images) {
  std::unique_lock lock(queue_mutex_);
  for (Pending* p : images) queue_.push_back(p);
  const auto all_done = [images] {
    return std::all_of(images.begin(), images.end(), [](const Pending* p) { return p->done; });
  };
  while (!all_done()) {
    if (encoding_) {
      queue_cv_.wait(lock);
      continue;
    }
    // The encoder is idle and some of these images wait: this thread runs the next batch.
    std::vector<Pending*> batch;
    int64_t patches = 0;
    while (!queue_.empty() &&
           (batch.empty() || patches + queue_.front()->patches <= vision::VisionEncoder::kBatchPatches)) {
      patches += queue_.front()->patches;
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    encoding_ = true;
    lock.unlock();
    try {
      encode_batch(batch);
    } catch (const std::exception& e) {  // out of memory: this batch's images fail, the queue goes on
      for (Pending* p : batch)
        if (!p->out.embd) p->error = fmt::format("the encoder failed: {}", e.what());
    }
    lock.lock();
    for (Pending* p : batch) p->done = true;
    encoding_ = false;
    queue_cv_.notify_all();
  }
}

void ImageInput::encode_batch(std::span<Pending* const> batch) {
  Stopwatch watch;
  std::vector<Pending*> encoded;                   // in the encoder batch
  std::vector<std::pair<Pending*, Pending*>> dups;  // (image, the same image earlier in the batch)
  std::vector<vision::VisionImage> frames;
  int64_t patches = 0;
  for (Pending* p : batch) {
    if (auto hit = cache_get(p->out.sha256)) {  // encoded by an earlier batch while this one waited
      p->out.embd = std::move(hit);
      p->out.cached = true;
      continue;
    }
    const auto same = std::find_if(encoded.begin(), encoded.end(),
                                   [p](const Pending* q) { return q->out.sha256 == p->out.sha256; });
    if (same != encoded.end()) {
      dups.emplace_back(p, *same);
      continue;
    }
    const size_t first = frames.size();
    for (size_t f = 0; f < p->tensors.frames.size(); ++f) {
      const media::ImageTensor& chw = p->tensors.frames[f];
      frames.push_back({chw.chw.data(), chw.width, chw.height, *p->outputs[f]});
      if (const Status st = encoder_->check_image(frames.back()); !st.ok()) {
        p->error = st.error().message;
        break;
      }
    }
    if (p->error) {
      frames.resize(first);  // this image alone fails
      continue;
    }
    encoded.push_back(p);
    patches += p->patches;
  }
  Status st = ok_status();
  if (!frames.empty()) {
    try {
      st = encoder_->encode_batch(frames, pool_, scratch_);
    } catch (const std::exception& e) {  // e.g. out of memory growing the scratch: this batch fails, the server stays
      st = make_error("{}", e.what());
    }
  }
  const double seconds = watch.seconds();
  for (Pending* p : encoded) {
    if (!st.ok()) {
      p->error = st.error().message;
      continue;
    }
    p->out.encode_s = patches > 0 ? seconds * static_cast<double>(p->patches) / static_cast<double>(patches) : 0;
    p->out.batch_images = static_cast<int>(encoded.size());
    p->out.embd = p->embd;
    cache_put(p->out.sha256, p->embd);
  }
  for (const auto& d : dups) {
    d.first->error = d.second->error;
    d.first->out.embd = d.second->out.embd;
    d.first->out.cached = true;
  }
  if (st.ok() && !encoded.empty()) {
    std::lock_guard lock(queue_mutex_);
    stats_.batches += 1;
    stats_.images += static_cast<int64_t>(encoded.size());
    stats_.max_batch_images = std::max(stats_.max_batch_images, static_cast<int>(encoded.size()));
  }
}

Result<std::string> ImageInput::expand_markers(const std::string& text, const std::vector<EncodedImage>& images) const {
  const vision::ProjectorType p = encoder_->config().projector;
  std::string out;
  size_t n = 0, pos = 0;
  for (;;) {
    const size_t at = text.find(kImageMarker, pos);
    if (at == std::string::npos) break;
    out.append(text, pos, at - pos);
    if (n < images.size())
      out += image_prompt_text(p, images[n].embd->tokens_per_frame, images[n].embd->rows, images[n].embd->cols);
    pos = at + kImageMarker.size();
    ++n;
  }
  out.append(text, pos);
  if (n != images.size())
    return make_error(
        "the rendered prompt holds {} image markers for {} images (the chat template dropped an image, or a text "
        "part contains '{}')",
        n, images.size(), kImageMarker);
  return out;
}

Result<std::vector<int32_t>> ImageInput::tokenize(const tokenizer::Tokenizer& tok, const std::string& text,
                                                  const std::vector<EncodedImage>& images, bool add_special) const {
  const vision::ProjectorType p = encoder_->config().projector;
  std::vector<int32_t> out;
  size_t n = 0, pos = 0;
  const auto append = [&out](const std::vector<tokenizer::TokenId>& ids) { out.insert(out.end(), ids.begin(), ids.end()); };
  for (;;) {
    const size_t at = text.find(kImageMarker, pos);
    const std::string_view piece = std::string_view(text).substr(pos, at == std::string::npos ? std::string::npos : at - pos);
    if (!piece.empty() || (pos == 0 && add_special)) append(tok.encode(piece, pos == 0 && add_special, false));
    if (at == std::string::npos) break;
    if (n < images.size())
      append(tok.encode(
          image_prompt_text(p, images[n].embd->tokens_per_frame, images[n].embd->rows, images[n].embd->cols), false,
          true));
    pos = at + kImageMarker.size();
    ++n;
  }
  if (n != images.size())
    return make_error("the prompt holds {} image markers ('{}') for {} images", n, kImageMarker, images.size());
  return out;
}

Result<std::vector<engine::PromptImage>> ImageInput::locate(const std::vector<int32_t>& prompt,
                                                            const tokenizer::Vocab& vocab,
                                                            const std::vector<EncodedImage>& images) const {
  EDGELM_TRY_STATUS(check_vocab(vocab));
  const vision::ProjectorType p = encoder_->config().projector;
  const std::string_view soft_text = image_soft_token(p);
  const int32_t soft = *vocab.find(soft_text);
  // Every image's frames, in prompt order: (image, frame).
  std::vector<std::pair<size_t, size_t>> frames;
  for (size_t i = 0; i < images.size(); ++i)
    for (size_t f = 0; f < images[i].embd->frames.size(); ++f) frames.emplace_back(i, f);
  std::vector<engine::PromptImage> out;
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != soft) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < prompt.size() && prompt[j] == soft) ++j;
    if (out.size() >= frames.size())
      return make_error("the prompt holds more runs of '{}' tokens than the {} image frames (the text may contain the "
                        "token itself)",
                        soft_text, frames.size());
    const auto [img, f] = frames[out.size()];
    const int32_t n_per = images[img].embd->tokens_per_frame;
    if (static_cast<int64_t>(j - i) != n_per)
      return make_error(
          "the prompt holds a run of {} '{}' tokens where image frame {} needs {} (the text may contain the token "
          "itself)",
          j - i, soft_text, out.size(), n_per);
    engine::PromptImage im;
    im.pos0 = static_cast<int32_t>(i);
    im.n_tokens = static_cast<int32_t>(n_per);
    im.embd = images[img].embd->frames[f];
    im.hash = frame_hash(images[img].hash, f);
    im.causal = image_prompt_causal(p);
    im.grid_w = images[img].embd->grid_w;
    im.grid_h = images[img].embd->grid_h;
    out.push_back(std::move(im));
    i = j;
  }
  if (out.size() != frames.size())
    return make_error("the prompt holds {} image frames' tokens for {} frames of {} images", out.size(), frames.size(),
                      images.size());
  return out;
}

}  // namespace edgelm::serve
