// Images of chat requests for a vision-language model (`serve --mmproj FILE`).
//
// Job: an OpenAI image_url content part's URL -> bytes (a data: URL's base64; file:// under
// --media-path and http(s):// with --allow-image-urls through image_source.h) -> an upright RGB image
// (media/decode.h, capped by --image-max-pixels before any pixel buffer exists) -> the
// encoder's processor (media/preprocess.h, the file's sizes, mean and std) -> VisionEncoder
// (vision/vit.h), once per frame -> the text model's soft tokens; and the prompt form of the
// image (image_prompt.h). Per projector:
//  - gemma3: a square PIL-bilinear resize to clip.vision.image_size; one frame;
//  - idefics3 (SmolVLM): Idefics3ImageProcessor with splitting (longest edge
//    clip.vision.preproc_image_size, default 4 x image_size; tiles of image_size, lanczos): rows x
//    cols tiles (row-major) then the global view, or the image alone when it fits one tile; one
//    encode per frame, one causal span of n_output_tokens per frame in the prompt;
//  - gemma4v (Gemma 4): dynamic resolution as ik_llama.cpp's clip.cpp sizes it (Qwen-VL's
//    smart_resize with factor patch_size * n_merge = 48 between 252 and 280 soft tokens' worth of
//    pixels, PIL bicubic), the file's mean and std; one frame of (w / 48) (h / 48) tokens, so the
//    token count differs per image (ImageEmbeddings::tokens_per_frame);
//  - qwen3vl (Qwen3.5, Qwen3-VL): Qwen2VLImageProcessor's smart_resize (media/preprocess.h) to
//    multiples of patch x merge, min_pixels 64 merged tokens (the processor's 65536 px at Qwen3.5's
//    32 px per token; at most a quarter of max_image_tokens), max_pixels max_image_tokens merged
//    tokens; one frame of gw x gh tokens, causal, with its grid for the text model's M-RoPE
//    positions (model/mrope.h).
//
// Invariants:
//  - Encodes are cached by the SHA-256 of the image bytes (an LRU of --image-cache entries; 0:
//    none): the same image is decoded and encoded once while it stays in the cache. Embeddings
//    are immutable and shared with the requests that use them.
//  - Encodes run one batch at a time on the encoder's own thread pool (never the engine's, so
//    decoding requests keep stepping meanwhile), with one reused scratch. All the images of a
//    request (every SmolVLM tile and global view with them) go to the encoder in one submission;
//    while a batch runs, the images of other requests queue, and the next batch takes everything
//    queued (FIFO, whole images, up to VisionEncoder::kBatchPatches patches, at least one image) as
//    one VisionEncoder::encode_batch. No thread of its own: a request thread whose images are
//    queued and finds the encoder idle runs the next batch (its own images and whatever queued
//    before them), then wakes the others. Cache hits never queue; an image the cache gained
//    while it waited (another request's) is taken from the cache; the same image twice in one
//    batch is encoded once. A batch's results are each image's own: an image refused by the
//    encoder fails alone, and the request threads stay blocked until their images are done, so
//    a request that goes away (client disconnect) leaves nothing dangling.
//  - An encoded image's encode_s is its share of its batch's encoder time (by patches: the shares
//    of a batch sum to its time) and batch_images the images encoded in that batch.
//  - Every user-caused failure is an error value with a message (never a crash): not a data URL,
//    not base64, not an image media type, undecodable, too many pixels.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/request.h"
#include "media/preprocess.h"
#include "model/arch.h"
#include "serve/image_source.h"
#include "tokenizer/tokenizer.h"
#include "vision/vit.h"

namespace edgelm::serve {

struct ImageInputOptions {
  std::string mmproj_path;
  int64_t max_pixels = 50'000'000;  // --image-max-pixels: width * height of a decoded image
  int max_images = 8;               // --max-images-per-request
  int cache_entries = 16;           // --image-cache: encoder outputs kept (LRU)
  // qwen3vl: the most soft tokens of one image (the processor's max_pixels = this x (patch x
  // merge)^2; the server passes --max-batch-tokens, since an image is computed in one step);
  // 0 or above the encoder's VisionEncoder::kMaxDynamicTokens: that.
  int max_image_tokens = 0;
  int threads = 1;                  // the encoder's pool
  ImageSourceOptions source;        // file:// and http(s):// URLs; source.max_bytes caps every image
};

// The soft tokens of one image: one frame (gemma3, or an idefics3 image that fits one tile) or
// rows x cols tiles then the global view (idefics3).
struct ImageEmbeddings {
  int rows = 0;  // 0 x 0: not split
  int cols = 0;
  int tokens_per_frame = 0;  // soft tokens of each frame (gemma4v: this image's; else the encoder's fixed count)
  std::vector<std::shared_ptr<const std::vector<float>>> frames;  // each [n_tokens_per_frame, n_embd]
  // qwen3vl: the one frame's merged grid (its tokens row-major: engine::PromptImage::grid_w/h, the
  // M-RoPE positions); 0 for the fixed-size projectors.
  int grid_w = 0;
  int grid_h = 0;
};

// One image of a request, encoded.
struct EncodedImage {
  std::string sha256;  // hex of the image bytes' digest
  uint64_t hash = 0;   // its first 8 bytes: the prefix-KV key (engine::PromptImage::hash, mixed per frame)
  std::shared_ptr<const ImageEmbeddings> embd;
  bool cached = false;                // from the encoder cache (or the same image earlier in the request)
  double decode_s = 0, encode_s = 0;  // 0 when cached; encode_s: its share of its batch's time
  int batch_images = 0;               // images in the encoder batch it was encoded in (0 when cached)
};

// One image of ImageInput::encode_images: a URL as encode_url takes it, or with raw_base64 also
// bare base64 (encode_base64_or_url).
struct ImageRef {
  std::string_view text;
  bool raw_base64 = false;
};

// The encoder queue's counts since the server started.
struct ImageEncoderStats {
  int64_t batches = 0;       // encode_batch calls
  int64_t images = 0;        // images encoded
  int max_batch_images = 0;  // the most images of one batch
  int queued = 0;            // images waiting now
  bool encoding = false;     // a batch is running now
};

// Where a rendered chat prompt puts each image before tokenization.
inline constexpr std::string_view kImageMarker = "<__media__>";

// Standard base64 (RFC 4648 alphabet, '=' padding optional); nullopt on any other byte.
std::optional<std::string> base64_decode(std::string_view in);

class ImageInput {
 public:
  static Result<std::unique_ptr<ImageInput>> open(const ImageInputOptions& opts);

  // The startup check against the text model: its architecture takes images of this projector
  // (gemma3 text with a gemma3 mmproj, llama text with an idefics3 one) and the projection is as
  // wide as its n_embd.
  Status check_model(const model::ModelConfig& c) const;

  // data:image/...;base64,..., file:///PATH or http(s)://... -> the soft tokens. Errors
  // (messages for a 400): another URL scheme, a file or URL image_source.h refuses (file:// and
  // http(s):// say how to enable them when off), not base64, not an image/* media type, over
  // source.max_bytes, a decode error (media/decode.h's message; for a URL whose Content-Type is
  // not image/*, that type too), an encoder error.
  Result<EncodedImage> encode_url(std::string_view url);
  // The encoded bytes of an image file (PNG, JPEG, WebP) -> the soft tokens (the cache as above).
  Result<EncodedImage> encode_bytes(const std::string& bytes);
  // Every image of a request, in order: each read, digested, looked up in the cache and (when
  // missing) decoded and preprocessed; the first failure is returned with its index in *failed
  // (nothing is encoded then). The rest go to the encoder queue in one submission (see the top).
  Result<std::vector<EncodedImage>> encode_images(std::span<const ImageRef> refs, size_t* failed = nullptr);
  // The same for the bytes of image files (`edgelm run --image`, repeated).
  Result<std::vector<EncodedImage>> encode_all_bytes(std::span<const std::string> bytes, size_t* failed = nullptr);
  ImageEncoderStats encoder_stats() const;
  // The bytes of a base64 string or a data: URL (the /predict "image" field); errors as above.
  Result<EncodedImage> encode_base64_or_url(std::string_view text);

  // The rendered prompt text with the i-th kImageMarker replaced by images[i]'s prompt form
  // (image_prompt.h); errors when the count of markers is not images.size().
  Result<std::string> expand_markers(const std::string& text, const std::vector<EncodedImage>& images) const;
  // Tokenizes prompt text holding one kImageMarker per image: the text between markers as plain
  // text (special-token text is not parsed: a user cannot forge image tokens), each marker as
  // its image's prompt form; BOS first when add_special. Errors: the marker count is not
  // images.size().
  Result<std::vector<int32_t>> tokenize(const tokenizer::Tokenizer& tok, const std::string& text,
                                        const std::vector<EncodedImage>& images, bool add_special) const;
  // The images' spans in the tokenized prompt: each run of soft-token ids, in order, must be one
  // frame of n_output_tokens (every image's frames in order). Errors: a marker token missing
  // from the vocabulary (named), runs that do not match the frames.
  Result<std::vector<engine::PromptImage>> locate(const std::vector<int32_t>& prompt, const tokenizer::Vocab& vocab,
                                                  const std::vector<EncodedImage>& images) const;
  // The projector's marker tokens (image_prompt_tokens, every tile token an image can need) are
  // in the vocabulary; else an error naming the missing one.
  Status check_vocab(const tokenizer::Vocab& vocab) const;

  const ImageInputOptions& options() const { return opts_; }
  const ImageSource& source() const { return source_; }
  const vision::VisionConfig& config() const { return encoder_->config(); }
  // The soft tokens per frame at the file's image_size (the only size for gemma3 and idefics3;
  // gemma4v's and qwen3vl's images vary: ImageEmbeddings::tokens_per_frame).
  int n_tokens_per_frame() const { return encoder_->n_output_tokens(); }
  // idefics3: the processor's longest edge and the most tiles per side it can cut (0 for gemma3).
  int longest_edge() const;
  int max_grid() const;

 private:
  ImageInput(ImageInputOptions opts, std::unique_ptr<vision::VisionEncoder> enc, ImageSource source);
  std::shared_ptr<const ImageEmbeddings> cache_get(const std::string& key);
  void cache_put(const std::string& key, std::shared_ptr<const ImageEmbeddings> embd);
  // The decoded image -> its frames' tensors [3, image_size, image_size] each, and the grid.
  // Errors: qwen3vl's smart_resize refusing the image (an aspect ratio over 200).
  Result<media::TiledTensors> preprocess(const media::Image& image) const;

  // One image on its way through the encoder queue.
  struct Pending {
    EncodedImage out;
    media::TiledTensors tensors;
    std::shared_ptr<ImageEmbeddings> embd;                  // its frames: outputs, once encoded
    std::vector<std::shared_ptr<std::vector<float>>> outputs;  // the encoder writes each frame here
    int64_t patches = 0;
    std::optional<std::string> error;  // the encoder refused it
    bool done = false;                 // under queue_mutex_
  };
  // The bytes of a URL or (raw_base64) bare base64; errors as encode_url's.
  Result<FetchedImage> read_ref(const ImageRef& ref);
  // encode_images once the bytes are read (a URL's Content-Type names a body that is no image).
  Result<std::vector<EncodedImage>> encode_fetched(std::span<const FetchedImage> fetched, size_t* failed);
  // Digest and cache lookup (out.cached), else decode, preprocess and the encoder's size check.
  Result<std::unique_ptr<Pending>> prepare(const std::string& bytes);
  // Queues the images, runs batches until they are done (see the top); fills each one's out.
  void encode_queued(std::span<Pending* const> images);
  // One batch (taken off the queue by the caller): encode_batch and the results.
  void encode_batch(std::span<Pending* const> batch);

  ImageInputOptions opts_;
  std::unique_ptr<vision::VisionEncoder> encoder_;
  ImageSource source_;
  ThreadPool pool_;
  vision::VisionScratch scratch_;  // pool_ and scratch_: only the thread running a batch
  mutable std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<Pending*> queue_;
  bool encoding_ = false;
  ImageEncoderStats stats_;
  std::mutex cache_mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const ImageEmbeddings>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace edgelm::serve
