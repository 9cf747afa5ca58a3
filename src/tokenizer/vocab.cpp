#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace edgelm::tokenizer {
namespace {

constexpr std::string_view kKeyModel = "tokenizer.ggml.model";
constexpr std::string_view kKeyTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kKeyScores = "tokenizer.ggml.scores";
constexpr std::string_view kKeyTypes = "tokenizer.ggml.token_type";
constexpr std::string_view kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kKeyAddEos = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kKeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr std::string_view kKeyBos = "tokenizer.ggml.bos_token_id";
constexpr std::string_view kKeyEos = "tokenizer.ggml.eos_token_id";

// Token texts that llama.cpp treats as end of generation whatever the metadata says (converters
// often leave eot_token_id unset, e.g. phi-3's "<|end|>").
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",        "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>",   "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>",
};

Error vocab_error(const Error& e) { return make_error("invalid vocabulary: {}", e.message); }

std::optional<uint8_t> hex_digit(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
  return std::nullopt;
}

// "<0xXX>" -> XX.
std::optional<uint8_t> parse_byte_text(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  const auto hi = hex_digit(text[3]);
  const auto lo = hex_digit(text[4]);
  if (!hi || !lo) return std::nullopt;
  return static_cast<uint8_t>(*hi << 4 | *lo);
}

std::string string_or_empty(const format::GgufMetadata& md, std::string_view key) {
  const format::GgufValue* v = md.find(key);
  return v != nullptr && v->as_string() != nullptr ? *v->as_string() : std::string();
}

bool contains_any(std::string_view s, std::initializer_list<std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](std::string_view p) { return s.find(p) != std::string_view::npos; });
}

}  // namespace

Result<Vocab> Vocab::from_metadata(const format::GgufMetadata& md) {
  Vocab v;
  auto model = md.get_string(kKeyModel);
  if (!model.ok()) return vocab_error(model.error());
  v.model_ = std::move(model).value();

  if (Status st = v.load_tokens(md); !st.ok()) return vocab_error(st.error());
  if (Status st = v.load_special_ids(md); !st.ok()) return vocab_error(st.error());
  v.detect_end_of_generation();
  v.build_special_list();
  v.apply_model_overrides(md);
  return v;
}

const Vocab::Token& Vocab::at(TokenId id) const {
  EDGELM_CHECK(contains(id), "token id ", id, " out of range [0, ", n_tokens(), ")");
  return tokens_[static_cast<size_t>(id)];
}

std::string_view Vocab::text(TokenId id) const {
  EDGELM_CHECK(contains(id), "token id ", id, " out of range [0, ", n_tokens(), ")");
  const auto i = static_cast<size_t>(id);
  return std::string_view(texts_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
}

size_t Vocab::text_slot(std::string_view text) const {
  const size_t mask = by_text_.size() - 1;
  for (size_t slot = std::hash<std::string_view>{}(text) & mask;; slot = (slot + 1) & mask) {
    const TokenId id = by_text_[slot];
    if (id == kNoToken || this->text(id) == text) return slot;
  }
}

std::optional<TokenId> Vocab::find(std::string_view text) const {
  if (by_text_.empty()) return std::nullopt;
  const TokenId id = by_text_[text_slot(text)];
  if (id == kNoToken) return std::nullopt;
  return id;
}

void Vocab::build_text_index() {
  size_t slots = 2;
  while (slots < 2 * tokens_.size()) slots *= 2;  // load factor <= 1/2: short probe runs
  by_text_.assign(slots, kNoToken);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_text_[text_slot(text(static_cast<TokenId>(i)))] = static_cast<TokenId>(i);  // last one wins
  }
}

size_t Vocab::memory_bytes() const {
  return tokens_.capacity() * sizeof(Token) + texts_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
         by_text_.capacity() * sizeof(TokenId) + special_.capacity() * sizeof(TokenId) +
         eog_.size() * (sizeof(TokenId) + 2 * sizeof(void*));
}

std::optional<TokenId> Vocab::byte_token(uint8_t b) const {
  const TokenId id = byte_tokens_[b];
  if (id == kNoToken) return std::nullopt;
  return id;
}

uint8_t Vocab::token_byte(TokenId id) const {
  EDGELM_CHECK(at(id).type == TokenType::byte, "token ", id, " is not a byte token");
  return *parse_byte_text(text(id));  // validated by load_tokens
}

Status Vocab::load_tokens(const format::GgufMetadata& md) {
  EDGELM_TRY(const format::GgufValue::Array* texts, md.get_array(kKeyTokens));
  if (texts->empty()) return make_error("metadata key '{}' is an empty list", kKeyTokens);
  if (texts->size() > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    return make_error("metadata key '{}' has {} entries, more than a token id can hold", kKeyTokens, texts->size());
  }
  const size_t n = texts->size();
  tokens_.resize(n);
  size_t text_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string* s = (*texts)[i].as_string();
    if (s == nullptr) {
      return make_error("metadata key '{}' must be an array of strings (element {} is {})", kKeyTokens, i,
                        format::gguf_type_name((*texts)[i].type()));
    }
    text_bytes += s->empty() ? 24 : s->size();
  }
  texts_.reserve(text_bytes);
  offsets_.reserve(n + 1);
  offsets_.push_back(0);
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = *(*texts)[i].as_string();
    // An empty text would match everywhere when splitting out special tokens.
    texts_ += s.empty() ? fmt::format("[EMPTY_{}]", i) : s;
    if (texts_.size() > std::numeric_limits<uint32_t>::max())
      return make_error("metadata key '{}': the token texts exceed 4 GiB", kKeyTokens);
    offsets_.push_back(static_cast<uint32_t>(texts_.size()));
  }

  // Scores and types are optional, but when present they must describe every token.
  const auto check_length = [&](std::string_view key) -> Result<const format::GgufValue::Array*> {
    EDGELM_TRY(const format::GgufValue::Array* arr, md.get_array(key));
    if (arr->size() != n) {
      return make_error("metadata key '{}' has {} entries but '{}' has {}", key, arr->size(), kKeyTokens, n);
    }
    return arr;
  };
  if (md.contains(kKeyScores)) {
    EDGELM_TRY(const format::GgufValue::Array* scores, check_length(kKeyScores));
    for (size_t i = 0; i < n; ++i) {
      const auto d = (*scores)[i].as_double();
      if (!d) return make_error("metadata key '{}': element {} is not a number", kKeyScores, i);
      tokens_[i].score = static_cast<float>(*d);
    }
  }
  if (md.contains(kKeyTypes)) {
    EDGELM_TRY(const format::GgufValue::Array* types, check_length(kKeyTypes));
    for (size_t i = 0; i < n; ++i) {
      const auto t = (*types)[i].as_int();
      if (!t) return make_error("metadata key '{}': element {} is not an integer", kKeyTypes, i);
      // Unknown values become `undefined`, as in llama.cpp: such tokens decode to nothing.
      tokens_[i].type =
          *t >= 0 && *t <= static_cast<int64_t>(TokenType::byte) ? static_cast<TokenType>(*t) : TokenType::undefined;
      if (tokens_[i].type == TokenType::byte && !parse_byte_text(text(static_cast<TokenId>(i)))) {
        return make_error("metadata key '{}': token {} has type byte but its text '{}' is not <0xXX>", kKeyTypes, i,
                          text(static_cast<TokenId>(i)));
      }
    }
  }

  build_text_index();
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    const char raw = static_cast<char>(b);
    auto id = find(std::string_view(name, 6));
    if (!id) id = find(std::string_view(&raw, 1));
    byte_tokens_[static_cast<size_t>(b)] = id.value_or(kNoToken);
  }
  return ok_status();
}

Status Vocab::load_special_ids(const format::GgufMetadata& md) {
  // Defaults per tokenizer model, as in llama.cpp; other models' defaults come with their
  // tokenizers.
  if (model_ == "llama") {
    bos_ = 1, eos_ = 2, unk_ = 0;
    add_bos_ = true, add_eos_ = false, add_space_prefix_ = true;
  } else if (model_ == "bert") {
    // BERT frames every input as "[CLS] text [SEP]": CLS plays BOS, SEP plays EOS.
    bos_ = find("[CLS]").value_or(101), eos_ = find("[SEP]").value_or(102), unk_ = find("[UNK]").value_or(100);
    add_bos_ = true, add_eos_ = true;
  } else if (model_ == "t5") {
    // T5's layout; XLM-RoBERTa files set their own ids (<s>=0, <pad>=1, </s>=2, <unk>=3).
    pad_ = 0, eos_ = 1, unk_ = 2;
    add_bos_ = false, add_eos_ = true;
  }
  const bool bert = model_ == "bert";
  struct SpecialKey {
    std::string_view key;
    TokenId* id;
  };
  const SpecialKey keys[] = {
      {kKeyBos, &bos_},
      {kKeyEos, &eos_},
      {"tokenizer.ggml.unknown_token_id", &unk_},
      {"tokenizer.ggml.padding_token_id", &pad_},
      {"tokenizer.ggml.eot_token_id", &eot_},
      {"tokenizer.ggml.eom_token_id", &eom_},
      {bert ? "tokenizer.ggml.cls_token_id" : "", &bos_},
      {bert ? "tokenizer.ggml.seperator_token_id" : "", &eos_},
  };
  for (const SpecialKey& k : keys) {
    // A default that does not fit this vocabulary is dropped (tiny test vocabularies).
    if (*k.id >= n_tokens()) *k.id = kNoToken;
    if (k.key.empty() || !md.contains(k.key)) continue;
    EDGELM_TRY(const uint32_t id, md.get_u32(k.key));
    // Converters write 0xFFFFFFFF (-1 as int32) for "no such token".
    if (id == UINT32_MAX) {
      *k.id = kNoToken;
      continue;
    }
    if (id >= static_cast<uint32_t>(n_tokens())) {
      return make_error("metadata key '{}' = {} is out of range (the vocabulary has {} tokens)", k.key, id, n_tokens());
    }
    *k.id = static_cast<TokenId>(id);
  }

  EDGELM_TRY(add_bos_, md.get_bool_or(kKeyAddBos, add_bos_));
  EDGELM_TRY(add_eos_, md.get_bool_or(kKeyAddEos, add_eos_));
  EDGELM_TRY(add_space_prefix_, md.get_bool_or(kKeyAddSpacePrefix, add_space_prefix_));
  // A default of "add BOS" lapses in a vocabulary without one; an explicit request is an error.
  if (add_bos_ && bos_ == kNoToken) {
    if (md.contains(kKeyAddBos)) return make_error("'{}' is true but '{}' is not set", kKeyAddBos, kKeyBos);
    add_bos_ = false;
  }
  if (add_eos_ && eos_ == kNoToken) {
    if (md.contains(kKeyAddEos)) return make_error("'{}' is true but '{}' is not set", kKeyAddEos, kKeyEos);
    add_eos_ = false;
  }
  return ok_status();
}

void Vocab::detect_end_of_generation() {
  for (const std::string_view text : kEogTexts) {
    const auto id = find(text);
    if (!id) continue;
    eog_.insert(*id);
    // llama.cpp forces such tokens to control so that they are never printed or matched as text.
    tokens_[static_cast<size_t>(*id)].type = TokenType::control;
  }
  // gpt-oss ("harmony") ends a message with <|end|> but a generation with <|return|>/<|call|>.
  const auto end = find("<|end|>");
  if (end && find("<|return|>") && find("<|call|>")) {
    eog_.erase(*end);
    tokens_[static_cast<size_t>(*end)].type = TokenType::user_defined;
  }
  for (const TokenId id : {eos_, eot_, eom_}) {
    if (id != kNoToken) eog_.insert(id);
  }
}

void Vocab::build_special_list() {
  for (TokenId id = 0; id < n_tokens(); ++id) {
    const TokenType t = tokens_[static_cast<size_t>(id)].type;
    if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown) {
      special_.push_back(id);
    }
  }
  // Longest first so that a token is never split out of a longer one. llama.cpp uses an
  // unstable sort here; ties keep id order so that results do not depend on the library.
  std::stable_sort(special_.begin(), special_.end(),
                   [&](TokenId a, TokenId b) { return text(a).size() > text(b).size(); });
}

void Vocab::apply_model_overrides(const format::GgufMetadata& md) {
  // GGUF has no per-token strip flags; llama.cpp sets them from the model's name, and so do we,
  // so that e.g. "<|user|>\nHi" splits the same way.
  std::string name = string_or_empty(md, "general.name");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  const std::string pre = string_or_empty(md, "tokenizer.ggml.pre");
  const std::string arch = string_or_empty(md, "general.architecture");
  const auto set = [&](std::string_view text, bool Token::*flag, bool value) {
    if (const auto id = find(text)) tokens_[static_cast<size_t>(*id)].*flag = value;
  };

  if (contains_any(pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set("<mask>", &Token::lstrip, true);
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    for (const TokenId id : special_) tokens_[static_cast<size_t>(id)].rstrip = true;
    set("</s>", &Token::rstrip, true);
    for (const std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, &Token::rstrip, false);
  } else if (contains_any(name, {"modern-bert"})) {
    set("[MASK]", &Token::lstrip, true);
  }
}

}  // namespace edgelm::tokenizer
