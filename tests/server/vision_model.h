// The synthetic vision models of the image tests: a Gemma 3 text model with stories260K's
// vocabulary padded by <start_of_image>, <end_of_image> and <image_soft_token> (control tokens),
// a tiny gemma3 mmproj (112 px, 4 soft tokens) as wide as it; a SmolVLM-like llama with the same
// vocabulary padded by SmolVLM's image tokens (model::smolvlm_image_tokens) and a tiny idefics3
// mmproj (64 px tiles, 4 tokens per frame); and small PNGs.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "support/test_data.h"
#include "vision/synthetic_mmproj.h"

namespace edgelm::test {

// 8x8 RGB PNGs with a white diagonal: on red, on blue.
inline const char* kRedPng =
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAMUlEQVR4nGP4////CTk5TMQAxFjlGCAUphwDnIUmx4DMQZZjQDMBLocuAZfDIg"
    "GRAwC16VDJ7J5G7wAAAABJRU5ErkJggg==";
inline const char* kBluePng =
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAMUlEQVR4nGP4//+/iMYdTMQAxFjlGCAUphwDnIUmx4DMQZZjQDMBLocuAZfDIg"
    "GRAwAal1UpWPdyngAAAABJRU5ErkJggg==";

// 16 x 8 (wide) and 8 x 16 (tall) PNGs with a white diagonal.
inline const char* kWidePng =
    "iVBORw0KGgoAAAANSUhEUgAAABAAAAAICAIAAAB/"
    "FOjAAAAAOElEQVR4nJXLMQ4AIAwCQOCjvq0vxcHEmC5FFmA42mYRccSilz8AgC+jU7nRXaHRexKj9kfTwWg2"
    "jioYsHqS1V8AAAAASUVORK5CYII=";
inline const char* kTallPng =
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAQCAIAAACk6KkqAAAAP0lEQVR4nM3MwQ0AMAgCQGUp938ylX2YGGsZoH4gOaJnJun2HEiPSAFmJg0Vr6HbMs"
    "zVtAumbWgTUK"
    "ZBv/oADt7KG0Mtl56CAAAAAElFTkSuQmCC";

inline constexpr int32_t kEmbd = 64;

inline std::string data_url(const char* b64, const char* type = "image/png") {
  return std::string("data:") + type + ";base64," + b64;
}

// gemma3, 2 layers, tok512 padded by 3 tokens that become the image markers (or stay reserved).
inline std::string write_model(const TempDir& dir, bool image_tokens) {
  model::SyntheticSpec s;
  s.arch = "gemma3";
  s.n_embd = kEmbd;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 1;
  s.head_dim = 16;
  s.n_ff = 128;
  s.n_ctx = 512;
  s.vocab_from = shared_path("models/tok512.bin");
  s.n_vocab = 515;
  s.pad_vocab = true;
  s.seed = 71;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (image_tokens) {
    auto tokens = *file->metadata.get_array("tokenizer.ggml.tokens").value();
    tokens[512] = format::GgufValue::from_string("<start_of_image>");
    tokens[513] = format::GgufValue::from_string("<end_of_image>");
    tokens[514] = format::GgufValue::from_string("<image_soft_token>");
    file->metadata.set("tokenizer.ggml.tokens", format::GgufValue::from_array(format::GgufType::string, tokens));
  }
  const std::string path = dir.file(image_tokens ? "gemma3-vision.gguf" : "gemma3-plain.gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

// A synth-mmproj `shape` projecting to `width`, written as dir/name (preproc_image_size: idefics3's
// longest edge, 0 the shape's).
inline std::string write_mmproj_shape(const TempDir& dir, const std::string& shape, int32_t width,
                                      const std::string& name, int32_t preproc_image_size = 0) {
  vision::SyntheticMmprojSpec m;
  EXPECT_TRUE(vision::apply_mmproj_shape(m, shape).ok());
  m.projection_dim = width;
  if (preproc_image_size > 0) m.preproc_image_size = preproc_image_size;
  auto file = vision::make_synthetic_mmproj(m);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  const std::string path = dir.file(name);
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

inline std::string write_mmproj(const TempDir& dir, int32_t width) {
  return write_mmproj_shape(dir, "tiny", width, "mmproj-" + std::to_string(width) + ".gguf");
}

// A llama (SmolVLM's text architecture), 2 layers, tok512 padded to 560 with SmolVLM's image
// tokens first (the smolvlm-256m shape's rule), or with reserved tokens only.
inline std::string write_smolvlm_model(const TempDir& dir, bool image_tokens) {
  model::SyntheticSpec s;
  s.arch = "llama";
  s.n_embd = kEmbd;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 128;
  s.n_ctx = 512;
  s.vocab_from = shared_path("models/tok512.bin");
  s.n_vocab = 560;
  s.pad_vocab = true;
  if (image_tokens) s.pad_tokens = model::smolvlm_image_tokens();
  s.seed = 73;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  const std::string path = dir.file(image_tokens ? "smolvlm.gguf" : "smolvlm-plain.gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

// The tiny-idefics3 mmproj (64 px tiles, 4 tokens per frame) projecting to `width`, with the
// processor's longest edge `edge` (128: a square image is 2 x 2 tiles; 64: never split).
inline std::string write_idefics3_mmproj(const TempDir& dir, int32_t width, int32_t edge = 128) {
  return write_mmproj_shape(dir, "tiny-idefics3", width,
                            "mmproj-idefics3-" + std::to_string(width) + "-" + std::to_string(edge) + ".gguf", edge);
}

}  // namespace edgelm::test
