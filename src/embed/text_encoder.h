// TextEncoder: one interface over every model that turns text into vectors or relevance scores —
// the BERT family (bert, nomic-bert, jina-bert-v2, XLM-RoBERTa as "bert" with a UGM vocabulary),
// decoder models in embedding mode (gemma-embedding, qwen3 with last-token pooling) and rerankers
// (a classification head, or an LLM scoring yes/no). /v1/embeddings, /v1/rerank, `edgelm embed`,
// `edgelm eval-cache` and the semantic cache all go through it; nothing above this layer knows
// which architecture is behind it.
//
// Data flow: text -> tokenize() (the model's own special tokens) -> encode() of many texts in one
// batched pass (every weight matrix multiplied once for all rows of all texts; attention within
// each text only) -> one pooled vector per text. Callers normalize and truncate (Matryoshka
// `dimensions`) themselves: encode() returns the raw pooled vector (after the file's dense
// projections, if any).
//
// Invariants:
//  - Immutable after load: tokenize()/encode() may run from several threads at once, each with its
//    own ThreadPool (a ThreadPool itself is used by one call at a time).
//  - A text's vector depends only on that text, never on the other texts of the batch nor on the
//    number of threads (up to the quantized matmul kernel's reassociation when the batch's row count
//    changes).
//  - encode() validates everything before computing: an empty text, a token outside the vocabulary,
//    a text longer than info().n_ctx, or a pooling the file cannot do is an error naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"

namespace edgelm::tokenizer {
class Tokenizer;
}

namespace edgelm::embed {

// GGUF `{arch}.pooling_type` values (llama.cpp's numbering).
enum class Pooling : int32_t { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };

// "none", "mean", "cls", "last", "rank".
std::string_view pooling_name(Pooling p);
// The inverse of pooling_name; an error naming the accepted values otherwise.
Result<Pooling> parse_pooling(std::string_view name);

struct EncoderInfo {
  std::string arch;        // general.architecture ("bert", "nomic-bert", "gemma-embedding", "qwen3", ...)
  std::string name;        // general.name, or the file's stem
  int32_t n_embd = 0;      // length of an embedding from encode() with mean/cls/last pooling
  int32_t n_ctx = 0;       // most tokens one text may have, special tokens included
  Pooling pooling = Pooling::mean;  // the file's pooling (rank: a reranker)
  bool can_rank = false;   // encode(..., Pooling::rank) works: a classification head or a yes/no LLM scorer
  // Matryoshka dimensions the model was trained for (EmbeddingGemma: 768, 512, 256, 128;
  // Qwen3-Embedding: any of 32..n_embd, listed as n_embd, 32), largest first. Empty: the model was
  // not trained for truncation, and a `dimensions` other than n_embd is refused. Non-empty: any
  // `dimensions` in [smallest listed, n_embd] is accepted (as OpenAI's API does).
  std::vector<int32_t> matryoshka_dims;
  // The instruction prefixes the model card asks for ("" where none): prepended by callers that
  // embed queries (the semantic cache, /v1/embeddings does NOT add them: clients send them).
  std::string query_prefix;
  std::string document_prefix;
};

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;

  virtual const EncoderInfo& info() const = 0;
  virtual const tokenizer::Tokenizer& tokenizer() const = 0;

  // Token ids of one text with the model's special tokens as the reference engine adds them
  // ([CLS] text [SEP]; <s> text </s>; <bos> text <eos>; text <|endoftext|>: the file's
  // add_bos/add_eos flags). Not truncated: encode() refuses a text longer than n_ctx.
  virtual Result<std::vector<int32_t>> tokenize(std::string_view text) const = 0;

  // Token ids of a (query, document) pair as the reranker reads it (a cross-encoder's
  // "<s> query </s></s> doc </s>", or an LLM reranker's prompt template). Error when !can_rank.
  virtual Result<std::vector<int32_t>> tokenize_pair(std::string_view query, std::string_view document) const = 0;

  // One batched pass over `texts` (token ids from tokenize()/tokenize_pair() or a client's token
  // arrays). Returns per text: pooling mean/cls/last: the pooled vector [n_embd] (not normalized);
  // rank: [1] the relevance score (a classification head's logit, an LLM reranker's P(yes)).
  // Pooling::none is an error here (per-token vectors are not served).
  virtual Result<std::vector<std::vector<float>>> encode(std::span<const std::vector<int32_t>> texts, Pooling pooling,
                                                         ThreadPool& pool) const = 0;
};

// Opens an embedding or reranker GGUF: an encoder architecture (bert, nomic-bert, jina-bert-v2,
// gemma-embedding) or a decoder file whose `{arch}.pooling_type` is set (qwen3 embedding/reranker).
// Errors: not such a file (a plain generative model: says so), a missing tensor, a bad shape.
Result<std::unique_ptr<TextEncoder>> open_text_encoder(const std::string& path);

// Whether the GGUF at `path` is an embedding/reranker model open_text_encoder() takes (reads the
// metadata only). `edgelm serve -m` uses it to serve /v1/embeddings and /v1/rerank instead of
// generation.
Result<bool> is_text_encoder_file(const std::string& path);

}  // namespace edgelm::embed
