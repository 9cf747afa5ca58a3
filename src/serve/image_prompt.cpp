// The prompt form of an image per projector (see image_prompt.h).
#include "serve/image_prompt.h"

#include <fmt/format.h>

namespace edgelm::serve {
namespace {

constexpr std::string_view kStartOfImage = "<start_of_image>";
constexpr std::string_view kEndOfImage = "<end_of_image>";
constexpr std::string_view kGemmaSoftToken = "<image_soft_token>";

constexpr std::string_view kFakeAround = "<fake_token_around_image>";
constexpr std::string_view kGlobalImage = "<global-img>";
constexpr std::string_view kIdeficsImage = "<image>";

constexpr std::string_view kGemma4Begin = "<|image>";
constexpr std::string_view kGemma4End = "<image|>";
constexpr std::string_view kGemma4Soft = "<|image|>";

constexpr std::string_view kVisionStart = "<|vision_start|>";
constexpr std::string_view kVisionEnd = "<|vision_end|>";
constexpr std::string_view kImagePad = "<|image_pad|>";

std::string tile_token(int row, int col) { return fmt::format("<row_{}_col_{}>", row, col); }

void append_run(std::string& out, std::string_view token, int n) {
  for (int i = 0; i < n; ++i) out += token;
}

}  // namespace

std::string_view image_soft_token(vision::ProjectorType p) {
  switch (p) {
    case vision::ProjectorType::gemma3: return kGemmaSoftToken;
    case vision::ProjectorType::idefics3: return kIdeficsImage;
    case vision::ProjectorType::qwen3vl: return kImagePad;
    case vision::ProjectorType::gemma4v: return kGemma4Soft;
  }
  return kGemmaSoftToken;
}

std::string image_prompt_text(vision::ProjectorType p, int n, int rows, int cols) {
  std::string out;
  switch (p) {
    case vision::ProjectorType::gemma3:
      out = "\n\n";
      out += kStartOfImage;
      append_run(out, kGemmaSoftToken, n);
      out += kEndOfImage;
      out += "\n\n";
      break;
    case vision::ProjectorType::idefics3:
      for (int r = 1; r <= rows; ++r) {
        for (int c = 1; c <= cols; ++c) {
          out += kFakeAround;
          out += tile_token(r, c);
          append_run(out, kIdeficsImage, n);
        }
        out += "\n";
      }
      if (rows > 0) out += "\n";
      out += kFakeAround;
      out += kGlobalImage;
      append_run(out, kIdeficsImage, n);
      out += kFakeAround;
      break;
    case vision::ProjectorType::qwen3vl:
      out += kVisionStart;
      append_run(out, kImagePad, n);
      out += kVisionEnd;
      break;
    case vision::ProjectorType::gemma4v:
      out = "\n\n";
      out += kGemma4Begin;
      append_run(out, kGemma4Soft, n);
      out += kGemma4End;
      out += "\n\n";
      break;
  }
  return out;
}

std::vector<std::string> image_prompt_tokens(vision::ProjectorType p, int max_grid) {
  std::vector<std::string> out;
  switch (p) {
    case vision::ProjectorType::gemma3:
      out = {std::string(kStartOfImage), std::string(kEndOfImage), std::string(kGemmaSoftToken)};
      break;
    case vision::ProjectorType::idefics3:
      out = {std::string(kFakeAround), std::string(kGlobalImage), std::string(kIdeficsImage)};
      for (int r = 1; r <= max_grid; ++r)
        for (int c = 1; c <= max_grid; ++c) out.push_back(tile_token(r, c));
      break;
    case vision::ProjectorType::qwen3vl:
      out = {std::string(kVisionStart), std::string(kVisionEnd), std::string(kImagePad)};
      break;
    case vision::ProjectorType::gemma4v:
      out = {std::string(kGemma4Begin), std::string(kGemma4End), std::string(kGemma4Soft)};
      break;
  }
  return out;
}

// Gemma 3 and Gemma 4 images attend bidirectionally; SmolVLM's and Qwen3-VL's causally, like text.
bool image_prompt_causal(vision::ProjectorType p) {
  return p == vision::ProjectorType::idefics3 || p == vision::ProjectorType::qwen3vl;
}

}  // namespace edgelm::serve
