// The prompt form of an image, per projector: the text that stands for it before tokenization,
// the tokens a vocabulary must have for it, and how its embedding runs attend.
//
// Job: one place for each model family's layout, as its Hugging Face processor writes it:
//  - gemma3 (Gemma3Processor): "\n\n<start_of_image>" + n x "<image_soft_token>" + "<end_of_image>\n\n";
//    one run of n soft tokens, attended bidirectionally (ik_llama.cpp's mtmd decodes it with
//    causal attention off).
//  - idefics3 (Idefics3Processor / SmolVLM, image_seq_len = n = 64): for a tiled image, per row r
//    and column c (1-based) "<fake_token_around_image><row_r_col_c>" + n x "<image>", "\n" after
//    each row, then "\n<fake_token_around_image><global-img>" + n x "<image>" +
//    "<fake_token_around_image>"; an un-split image (rows = cols = 0) is
//    "<fake_token_around_image><global-img>" + n x "<image>" + "<fake_token_around_image>".
//    One run of n "<image>" per frame (tiles row-major, then the global view), attended causally
//    like text (mtmd turns causal attention off only for the Gemma projectors).
//  - qwen3vl (Qwen3-VL / Qwen3.5, as mtmd wraps it): "<|vision_start|>" + n x "<|image_pad|>" +
//    "<|vision_end|>" (n = the image's merged tokens, gw x gh, row-major), attended causally like
//    text; the tokens take M-RoPE positions (model/mrope.h).
//  - gemma4v (Gemma4Processor with its per-image soft-token count n): "\n\n<|image>" + n x
//    "<|image|>" + "<image|>\n\n"; one run, attended bidirectionally (mtmd turns causal attention
//    off for Gemma 4's projector too).
//
// Invariants: the runs of the soft token in image_prompt_text are exactly the frames, in order,
// each n long, and separated by other tokens (so the runs in a tokenized prompt can be matched
// to frames one to one).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "vision/clip_config.h"

namespace edgelm::serve {

// The placeholder token whose runs hold the image embeddings: "<image_soft_token>", "<image>",
// "<|image_pad|>".
std::string_view image_soft_token(vision::ProjectorType p);

// The prompt text of one image of rows x cols tiles (0 x 0: un-split) with n tokens per frame.
std::string image_prompt_text(vision::ProjectorType p, int n, int rows, int cols);

// The tokens the vocabulary needs for images of up to max_grid x max_grid tiles.
std::vector<std::string> image_prompt_tokens(vision::ProjectorType p, int max_grid);

// Whether the runs attend causally (engine::PromptImage::causal).
bool image_prompt_causal(vision::ProjectorType p);

}  // namespace edgelm::serve
