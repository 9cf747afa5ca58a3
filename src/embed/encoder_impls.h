// The two TextEncoder implementations behind open_text_encoder() (text_encoder.h); internal to
// the embed layer.
//  - bert_family_encoder.cpp: encoder-only architectures (bert, nomic-bert, jina-bert-v2; XLM-RoBERTa
//    is "bert" with a UGM vocabulary) on model::EncoderModel, pooling mean/cls/last and a
//    classification head for rank, every text of a call in one batched pass.
//  - decoder_encoder.cpp: decoder architectures in embedding mode (gemma-embedding: bidirectional
//    Gemma 3 + dense projections; qwen3 with a pooling_type: last-token embeddings, yes/no reranking),
//    run on the engine's batched forward.
#pragma once

#include <memory>

#include "core/result.h"
#include "embed/text_encoder.h"
#include "format/model_file.h"

namespace edgelm::embed {

// Architectures each implementation takes (general.architecture values).
bool is_bert_family_arch(std::string_view arch);
bool is_decoder_encoder_file(const format::ModelFile& file);  // gemma-embedding, or a decoder with pooling_type

Result<std::unique_ptr<TextEncoder>> open_bert_family_encoder(format::ModelFile file, const std::string& path);
Result<std::unique_ptr<TextEncoder>> open_decoder_encoder(format::ModelFile file, const std::string& path);

}  // namespace edgelm::embed
