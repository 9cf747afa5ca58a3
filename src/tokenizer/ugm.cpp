#include "tokenizer/ugm.h"

#include <algorithm>
#include <cfloat>

#include "tokenizer/special_split.h"
#include "tokenizer/space_mark.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

constexpr std::string_view kKeyCharsmap = "tokenizer.ggml.precompiled_charsmap";
constexpr std::string_view kKeyRemoveExtraSpaces = "tokenizer.ggml.remove_extra_whitespaces";
constexpr float kUnknownPenalty = 10.0f;

// Length of the UTF-8 character at s[pos] by llama.cpp's decoder (unicode_cpt_from_utf8: a
// lead byte and its continuation bytes, no overlong or range checks), or 0 when invalid.
size_t lenient_char_length(std::string_view s, size_t pos) {
  const auto b = static_cast<uint8_t>(s[pos]);
  size_t n = 0;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
  } else {
    return 0;  // a continuation byte, or 0xF8..0xFF
  }
  if (pos + n > s.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((static_cast<uint8_t>(s[pos + i]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

Result<std::string> read_charsmap_blob(const format::GgufMetadata& md) {
  const format::GgufValue* v = md.find(kKeyCharsmap);
  if (v == nullptr) return std::string();
  const format::GgufValue::Array* arr = v->as_array();
  if (arr == nullptr || (v->array_type() != format::GgufType::u8 && v->array_type() != format::GgufType::i8)) {
    return make_error("metadata key '{}' must be an array of u8 or i8", kKeyCharsmap);
  }
  std::string blob(arr->size(), '\0');
  for (size_t i = 0; i < arr->size(); ++i) {
    const auto x = (*arr)[i].as_int();
    if (!x) return make_error("metadata key '{}': element {} is not an integer", kKeyCharsmap, i);
    blob[i] = static_cast<char>(static_cast<uint8_t>(*x));
  }
  return blob;
}

// The best segmentation of the normalized text up to a byte offset: its last token, where that
// token starts, and the total score.
struct Best {
  TokenId token;
  size_t start;
  double score;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> UgmTokenizer::create(Vocab vocab, const format::GgufMetadata& md) {
  if (vocab.unk() == kNoToken) {
    return make_error("invalid vocabulary: a unigram (t5) vocabulary needs an unknown token "
                      "(tokenizer.ggml.unknown_token_id)");
  }
  EDGELM_TRY(std::string blob, read_charsmap_blob(md));
  Charsmap charsmap;
  if (!blob.empty()) {
    auto parsed = Charsmap::parse(std::move(blob));
    if (!parsed.ok()) return make_error("invalid vocabulary: {}", parsed.error().message);
    charsmap = std::move(parsed).value();
  }
  EDGELM_TRY(const bool remove_extra, md.get_bool_or(kKeyRemoveExtraSpaces, false));
  return std::unique_ptr<Tokenizer>(new UgmTokenizer(std::move(vocab), std::move(charsmap), remove_extra));
}

UgmTokenizer::UgmTokenizer(Vocab vocab, Charsmap charsmap, bool remove_extra_whitespaces)
    : Tokenizer(std::move(vocab)), charsmap_(std::move(charsmap)), remove_extra_whitespaces_(remove_extra_whitespaces) {
  const Vocab& v = this->vocab();
  std::vector<std::pair<std::string, int32_t>> pieces, user_defined;
  float min_score = FLT_MAX;
  for (TokenId id = 0; id < v.n_tokens(); ++id) {
    const TokenType t = v.type(id);
    if (t == TokenType::normal) min_score = std::min(min_score, v.score(id));
    if (t == TokenType::normal || t == TokenType::user_defined || t == TokenType::unused) {
      pieces.emplace_back(v.text(id), id);
    }
    if (t == TokenType::user_defined) user_defined.emplace_back(v.text(id), id);
  }
  pieces_ = ByteTrie(std::move(pieces));
  user_defined_ = ByteTrie(std::move(user_defined));
  unknown_score_ = min_score - kUnknownPenalty;  // in float, as llama.cpp
}

std::string UgmTokenizer::normalize(std::string_view text) const {
  const bool prepend_space = vocab().add_space_prefix();
  std::string out;
  out.reserve(text.size() * 3);
  bool space_prepended = false;
  bool in_word = false;
  const auto emit = [&](std::string_view piece) {
    for (const char c : piece) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend_space && !space_prepended) || remove_extra_whitespaces_) {
            out.append(kSpaceMark);
            space_prepended = true;
          }
        }
        out += c;
      } else {
        in_word = false;
        if (!remove_extra_whitespaces_) out.append(kSpaceMark);
      }
    }
  };
  for (size_t pos = 0; pos < text.size();) {
    const std::string_view rest = text.substr(pos);
    if (const size_t n = user_defined_.longest_path(rest); n > 0) {
      emit(rest.substr(0, n));
      pos += n;
      continue;
    }
    if (const Charsmap::Match m = charsmap_.longest_match(rest); m.length > 0) {
      emit(m.replacement);
      pos += m.length;
      continue;
    }
    if (const size_t n = lenient_char_length(text, pos); n > 0) {
      emit(rest.substr(0, n));
      pos += n;
    } else {
      emit(kUtf8Replacement);
      pos += 1;
    }
  }
  return out;
}

void UgmTokenizer::encode_fragment(std::string_view text, std::vector<TokenId>& out) const {
  const Vocab& v = vocab();
  const std::string norm = normalize(text);
  const size_t n = norm.size();
  if (n == 0) return;

  std::vector<Best> best(n + 1, Best{v.unk(), 0, -DBL_MAX});
  best[0].score = 0.0;
  for (size_t pos = 0; pos < n;) {
    const size_t char_len = std::min<size_t>(utf8_lead_length(static_cast<uint8_t>(norm[pos])), n - pos);
    const double base = best[pos].score;
    bool whole_char_piece = false;
    ByteTrie::Node node = ByteTrie::kRoot;
    for (size_t end = pos; end < n;) {
      node = pieces_.child(node, static_cast<uint8_t>(norm[end]));
      if (node == ByteTrie::kNone) break;
      ++end;
      const int32_t id = pieces_.value(node);
      if (id == ByteTrie::kNoValue) continue;
      if (end - pos == char_len) whole_char_piece = true;
      const double score = base + (v.type(id) == TokenType::user_defined ? 0.0 : static_cast<double>(v.score(id)));
      if (score > best[end].score) best[end] = {id, pos, score};
    }
    if (!whole_char_piece) {
      const double score = base + static_cast<double>(unknown_score_);
      if (score > best[pos + char_len].score) best[pos + char_len] = {v.unk(), pos, score};
    }
    pos += char_len;
  }

  // Back from the end; a run of unknown tokens becomes one.
  const size_t first = out.size();
  bool prev_unknown = false;
  for (size_t end = n;;) {
    const Best& b = best[end];
    const bool unknown = b.token == v.unk();
    if (!(prev_unknown && unknown)) out.push_back(b.token);
    if (b.start == 0) break;
    prev_unknown = unknown;
    end = b.start;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

std::vector<TokenId> UgmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = vocab();
  std::vector<TokenId> out;
  if (add_special && v.add_bos()) out.push_back(v.bos());
  for (const Fragment& f : split_special(v, text, parse_special)) {
    if (f.is_token()) {
      out.push_back(f.token);
    } else {
      encode_fragment(f.text, out);
    }
  }
  if (add_special && v.add_eos()) out.push_back(v.eos());
  return out;
}

std::string UgmTokenizer::token_to_piece(TokenId id) const {
  const Vocab& v = vocab();
  switch (v.type(id)) {
    case TokenType::normal: return unescape_space_marks(v.text(id));
    case TokenType::user_defined: return std::string(v.text(id));
    case TokenType::byte: return std::string(1, static_cast<char>(v.token_byte(id)));
    case TokenType::control:
    case TokenType::unknown:
    case TokenType::unused:
    case TokenType::undefined: return {};
  }
  return {};
}

}  // namespace edgelm::tokenizer
