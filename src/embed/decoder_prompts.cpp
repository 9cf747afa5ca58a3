// Model-card prompts of the decoder embedders and rerankers (see decoder_prompts.h).
#include "embed/decoder_prompts.h"

#include <string>

namespace edgelm::embed {
namespace {

constexpr std::string_view kRerankPrefix =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
constexpr std::string_view kRerankSuffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

}  // namespace

void set_model_card_prompts(EncoderInfo& info) {
  info.query_prefix.clear();
  info.document_prefix.clear();
  info.matryoshka_dims.clear();
  if (info.arch == "gemma-embedding") {
    info.query_prefix = "task: search result | query: ";
    info.document_prefix = "title: none | text: ";
    info.matryoshka_dims.push_back(info.n_embd);
    for (const int32_t d : {768, 512, 256, 128})
      if (d < info.n_embd) info.matryoshka_dims.push_back(d);
  } else if (info.arch == "qwen3" && info.pooling == Pooling::last) {
    info.query_prefix = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:";
    // Qwen3-Embedding is trained for any output width from 32 to its full one (model card).
    info.matryoshka_dims.push_back(info.n_embd);
    if (info.n_embd > 32) info.matryoshka_dims.push_back(32);
  }
}

std::vector<int32_t> tokenize_yes_no_prompt(const tokenizer::Tokenizer& tok, std::string_view query,
                                            std::string_view document, std::string_view instruction) {
  std::string body;
  body.reserve(query.size() + document.size() + instruction.size() + 40);
  body.append("<Instruct>: ").append(instruction).append("\n<Query>: ").append(query);
  body.append("\n<Document>: ").append(document);
  std::vector<int32_t> ids = tok.encode(kRerankPrefix, /*add_special=*/false, /*parse_special=*/true);
  const std::vector<int32_t> mid = tok.encode(body, false, false);
  const std::vector<int32_t> end = tok.encode(kRerankSuffix, false, true);
  ids.insert(ids.end(), mid.begin(), mid.end());
  ids.insert(ids.end(), end.begin(), end.end());
  return ids;
}

}  // namespace edgelm::embed
