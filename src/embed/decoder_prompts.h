// What the model cards of the decoder embedders and rerankers ask of their inputs, as data:
// instruction prefixes and Matryoshka dimensions (EncoderInfo), and the yes/no prompt of an LLM
// reranker (Qwen3-Reranker's template). Internal to the embed layer (decoder_encoder.cpp).
//
// Invariant: user text never becomes special tokens inside the reranker prompt (the query and the
// document are tokenized as plain text; only the template's own markers are specials).
#pragma once

#include <string_view>
#include <vector>

#include "core/result.h"
#include "embed/text_encoder.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::embed {

// Fills info.query_prefix, document_prefix and matryoshka_dims from info.arch, n_embd and pooling:
//  - gemma-embedding (EmbeddingGemma): "task: search result | query: " / "title: none | text: ",
//    Matryoshka 768, 512, 256, 128 (those below n_embd, after n_embd itself);
//  - qwen3 with last pooling (Qwen3-Embedding): "Instruct: Given a web search query, retrieve
//    relevant passages that answer the query\nQuery:" for queries, nothing for documents, any
//    truncation (its card: 32 to 1024);
//  - anything else, rerankers included: no prefixes.
void set_model_card_prompts(EncoderInfo& info);

// The default task of Qwen3-Reranker's prompt.
inline constexpr std::string_view kRerankInstruction =
    "Given a web search query, retrieve relevant passages that answer the query";

// Qwen3-Reranker's input for (query, document): the system turn asking for "yes" or "no", the
// user turn "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}", and the
// assistant turn opened with an empty think block ("<think>\n\n</think>\n\n"), as its model card
// tokenizes it (prefix, body and suffix separately, no BOS/EOS added).
std::vector<int32_t> tokenize_yes_no_prompt(const tokenizer::Tokenizer& tok, std::string_view query,
                                            std::string_view document,
                                            std::string_view instruction = kRerankInstruction);

}  // namespace edgelm::embed
