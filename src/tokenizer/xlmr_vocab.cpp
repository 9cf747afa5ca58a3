#include "tokenizer/xlmr_vocab.h"

#include <cmath>
#include <initializer_list>
#include <random>
#include <string_view>
#include <unordered_set>

#include "tokenizer/charsmap.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

using format::GgufType;
using format::GgufValue;

constexpr std::string_view kMark = "\xE2\x96\x81";  // U+2581, SentencePiece's word start

std::string utf8(char32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

std::string utf8(std::initializer_list<char32_t> cps) {
  std::string s;
  for (const char32_t cp : cps) utf8_append(s, cp);
  return s;
}

// A closed range of code points that are letters of one script.
struct Range {
  char32_t first, last;
};

// Script alphabets for single characters and random words.
struct Script {
  std::vector<Range> ranges;
  int max_word = 6;  // random words have 2..max_word characters
};

const std::vector<Script>& scripts() {
  static const std::vector<Script> s = {
      {{{'a', 'z'}}, 8},                                           // Latin lower
      {{{'a', 'z'}, {0xE0, 0xFF}, {0x0100, 0x017F}}, 8},           // Latin with diacritics
      {{{0x1EA0, 0x1EF9}, {'a', 'z'}}, 5},                         // Vietnamese
      {{{0x03B1, 0x03C9}}, 8},                                     // Greek
      {{{0x0430, 0x044F}}, 8},                                     // Cyrillic
      {{{0x0430, 0x044F}, {0x0450, 0x045F}}, 6},                   // Cyrillic extended
      {{{0x05D0, 0x05EA}}, 6},                                     // Hebrew
      {{{0x0621, 0x064A}}, 6},                                     // Arabic
      {{{0x0905, 0x0939}, {0x093E, 0x094D}}, 6},                   // Devanagari
      {{{0x0E01, 0x0E2E}, {0x0E30, 0x0E39}}, 6},                   // Thai
      {{{0x3041, 0x3093}}, 4},                                     // Hiragana
      {{{0x30A1, 0x30F6}}, 4},                                     // Katakana
      {{{0x4E00, 0x9FFF}}, 3},                                     // CJK
      {{{0xAC00, 0xD7A3}}, 3},                                     // Hangul syllables
      {{{0x1780, 0x17A2}, {0x17B6, 0x17C5}}, 4},                   // Khmer: vowel signs only inside words
  };
  return s;
}

// Single characters that get a piece of their own (and a word-start form where letters).
const std::vector<Range>& single_ranges() {
  static const std::vector<Range> r = {
      {0xA1, 0xBF},     {0xC0, 0xFF},     {0x0100, 0x017F}, {0x0180, 0x024F}, {0x0370, 0x03FF},
      {0x0400, 0x045F}, {0x0531, 0x0587}, {0x05D0, 0x05EA}, {0x0600, 0x06FF}, {0x0900, 0x097F},
      {0x0980, 0x09FF}, {0x0E01, 0x0E5B}, {0x10D0, 0x10FA}, {0x1780, 0x17A2},  // Khmer consonants only
      {0x1EA0, 0x1EF9}, {0x2010, 0x2027}, {0x2030, 0x205E}, {0x20A0, 0x20BF}, {0x2190, 0x21FF},
      {0x2200, 0x22FF}, {0x2600, 0x26FF}, {0x2700, 0x27BF}, {0x3001, 0x303F}, {0x3041, 0x3096},
      {0x30A1, 0x30FA}, {0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F}, {0x1F680, 0x1F6FF},
  };
  return r;
}

constexpr const char* kCommonWords[] = {
    "the",   "of",    "and",   "to",     "in",    "a",     "is",     "that",  "for",   "it",    "as",    "was",
    "with",  "be",    "by",    "on",     "not",   "he",    "this",   "are",   "or",    "his",   "from",  "at",
    "which", "but",   "have",  "an",     "had",   "they",  "you",    "were",  "their", "one",   "all",   "we",
    "can",   "her",   "has",   "there",  "been",  "if",    "more",   "when",  "will",  "would", "who",   "so",
    "no",    "out",   "up",    "into",   "do",    "any",   "your",   "what",  "some",  "time",  "about", "than",
    "its",   "only",  "new",   "other",  "may",   "these", "two",    "then",  "how",   "my",    "our",   "them",
    "hello", "world", "how",   "are",    "all",   "months","normal", "only",  "own",   "token", "emoji", "apple",
    "multiple", "concatenated", "that", "has",  "its",   "cpp",   "dis",    "card",  "cards", "era",   "ied",
    "fü",    "hrer",  "year",  "people", "work",  "good",  "day",    "way",   "use",   "make",  "like",  "just",
};

// Scores: -ln(rank + 2), in steps of 1/4096 (exact in float).
float score_for_rank(size_t rank) {
  const double s = std::log(static_cast<double>(rank) + 2.0);
  return -static_cast<float>(std::floor(s * 4096.0 + 0.5) / 4096.0);
}

class PieceList {
 public:
  explicit PieceList(size_t limit) : limit_(limit) { pieces_.reserve(limit); }
  // Adds `text` unless present or the list is full; true when the list is full.
  bool add(const std::string& text) {
    if (pieces_.size() >= limit_) return true;
    if (seen_.insert(text).second) pieces_.push_back(text);
    return pieces_.size() >= limit_;
  }
  bool full() const { return pieces_.size() >= limit_; }
  size_t size() const { return pieces_.size(); }
  std::vector<std::string>& pieces() { return pieces_; }

 private:
  size_t limit_;
  std::vector<std::string> pieces_;
  std::unordered_set<std::string> seen_;
};

bool is_letter_like(char32_t cp) {
  return (cp >= 0xC0 && cp != 0xD7 && cp != 0xF7 && cp < 0x2000) || (cp >= 0x3041 && cp <= 0x30FA);
}

// Every piece of the vocabulary, in score order, at most `limit` of them.
std::vector<std::string> generate_pieces(size_t limit) {
  PieceList list(limit);
  const std::string mark(kMark);
  list.add(mark);
  for (const char* p : {",", ".", "s", "'", "-", ":", "(", ")", "!", "?", "\"", ";"}) list.add(p);
  for (const char* w : kCommonWords) list.add(mark + w);
  for (char c = 'a'; c <= 'z'; ++c) list.add(std::string(1, c)), list.add(mark + c);
  for (char c = '0'; c <= '9'; ++c) list.add(std::string(1, c)), list.add(mark + c);
  for (char c = 'A'; c <= 'Z'; ++c) list.add(std::string(1, c)), list.add(mark + c);
  for (char c = 0x21; c < 0x7F; ++c) list.add(std::string(1, c));
  for (const char* w : kCommonWords) {
    std::string cap = w;
    cap[0] = static_cast<char>(cap[0] >= 'a' && cap[0] <= 'z' ? cap[0] - 'a' + 'A' : cap[0]);
    list.add(mark + cap);
    list.add(w);
  }
  for (const char* p : {"▁(", "▁'", "▁\"", "▁-", "▁=", "▁!", "▁?", "!!", "!!!", "...", "▁...", "),", ").", "▁//"}) {
    list.add(p);
  }
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) list.add(std::string{a, b}), list.add(mark + a + b);
  }
  for (int d = 0; d < 100; ++d) {
    const std::string n = std::to_string(d);
    list.add(n), list.add(mark + n);
    list.add(std::to_string(d / 10) + std::to_string(d % 10));
  }
  for (int d = 0; d < 1000; d += 37) list.add(std::to_string(100 + d % 900)), list.add(mark + std::to_string(1000 + d));
  for (const Range& r : single_ranges()) {
    for (char32_t cp = r.first; cp <= r.last; ++cp) {
      list.add(utf8(cp));
      if (is_letter_like(cp)) list.add(mark + utf8(cp));
    }
  }
  for (char32_t a = 0x0430; a <= 0x044F; ++a) {
    for (char32_t b = 0x0430; b <= 0x044F; ++b) list.add(utf8({a, b})), list.add(mark + utf8({a, b}));
  }
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) {
      for (char c = 'a'; c <= 'z'; ++c) list.add(std::string{a, b, c}), list.add(mark + a + b + c);
    }
  }
  for (char32_t cp = 0x4E00; cp <= 0x9FFF && !list.full(); ++cp) list.add(utf8(cp));
  for (char32_t cp = 0xAC00; cp <= 0xD7A3 && !list.full(); ++cp) list.add(utf8(cp)), list.add(mark + utf8(cp));

  // Random words: a script, a length, letters of it; half start a word. Raw generator output
  // only (no distributions), so every standard library gives the same words.
  std::mt19937_64 rng(0x584C4D52u);  // "XLMR"
  const std::vector<Script>& sc = scripts();
  while (!list.full()) {
    const Script& s = sc[rng() % sc.size()];
    const int len = 2 + static_cast<int>(rng() % static_cast<uint64_t>(s.max_word - 1));
    std::string word = rng() % 2 == 0 ? mark : std::string();
    for (int i = 0; i < len; ++i) {
      const Range& r = s.ranges[rng() % s.ranges.size()];
      word += utf8(r.first + static_cast<char32_t>(rng() % (r.last - r.first + 1)));
    }
    list.add(word);
  }
  return std::move(list.pieces());
}

}  // namespace

std::vector<std::pair<std::string, std::string>> xlmr_charsmap_rules() {
  std::vector<std::pair<std::string, std::string>> rules;
  const auto rule = [&](std::string from, std::string to) { rules.emplace_back(std::move(from), std::move(to)); };
  for (char32_t cp = 0xFF01; cp <= 0xFF5E; ++cp) rule(utf8(cp), std::string(1, static_cast<char>(cp - 0xFF01 + 0x21)));
  for (const char c : {'\t', '\n', '\v', '\f', '\r'}) rule(std::string(1, c), " ");
  rule(utf8(0x3000), " "), rule(utf8(0x00A0), " "), rule(utf8(0x202F), " "), rule(utf8(0x205F), " ");
  for (char32_t cp = 0x2000; cp <= 0x200A; ++cp) rule(utf8(cp), " ");
  for (char32_t cp = 0x01; cp <= 0x08; ++cp) rule(utf8(cp), "");
  for (char32_t cp = 0x0E; cp <= 0x1F; ++cp) rule(utf8(cp), "");
  for (const char32_t cp : {0x7F, 0xAD, 0x200B, 0xFEFF}) rule(utf8(cp), "");
  // Ligatures.
  const char* ligatures[] = {"ff", "fi", "fl", "ffi", "ffl", "st", "st"};
  for (char32_t i = 0; i < 7; ++i) rule(utf8(0xFB00 + i), ligatures[i]);
  rule(utf8(0x0132), "IJ"), rule(utf8(0x0133), "ij"), rule(utf8(0x01C4), "D" + utf8(0x017D));
  // Super- and subscripts, fractions.
  rule(utf8(0xB9), "1"), rule(utf8(0xB2), "2"), rule(utf8(0xB3), "3"), rule(utf8(0x2070), "0");
  for (char32_t d = 4; d <= 9; ++d) rule(utf8(0x2070 + d), std::string(1, static_cast<char>('0' + d)));
  for (char32_t d = 0; d <= 9; ++d) rule(utf8(0x2080 + d), std::string(1, static_cast<char>('0' + d)));
  rule(utf8(0xBC), "1" + utf8(0x2044) + "4"), rule(utf8(0xBD), "1" + utf8(0x2044) + "2");
  rule(utf8(0xBE), "3" + utf8(0x2044) + "4");
  // Letterlike and compatibility symbols.
  rule(utf8(0x2122), "TM"), rule(utf8(0x2103), utf8(0xB0) + "C"), rule(utf8(0x2116), "No");
  rule(utf8(0x2026), "..."), rule(utf8(0x2025), ".."), rule(utf8(0x2126), utf8(0x03A9));
  rule(utf8(0x212A), "K"), rule(utf8(0x212B), utf8(0xC5)), rule(utf8(0x2121), "TEL");
  const char* roman[] = {"I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"};
  const char* roman_lower[] = {"i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii"};
  for (char32_t i = 0; i < 12; ++i) rule(utf8(0x2160 + i), roman[i]), rule(utf8(0x2170 + i), roman_lower[i]);
  for (char32_t i = 0; i < 20; ++i) rule(utf8(0x2460 + i), std::to_string(i + 1));
  rule(utf8(0x338F), "kg"), rule(utf8(0x339C), "mm"), rule(utf8(0x339D), "cm"), rule(utf8(0x339E), "km");
  // Half-width katakana; a voiced form spans two characters.
  const char32_t halfwidth[] = {0x30A2, 0x30A4, 0x30A6, 0x30A8, 0x30AA, 0x30AB, 0x30AD, 0x30AF, 0x30B1, 0x30B3};
  for (char32_t i = 0; i < 10; ++i) rule(utf8(0xFF71 + i), utf8(halfwidth[i]));
  rule(utf8({0xFF76, 0xFF9E}), utf8(0x30AC)), rule(utf8({0xFF77, 0xFF9E}), utf8(0x30AE));
  // NFC compositions of a base letter and a combining mark.
  const struct {
    char base;
    char32_t mark, composed;
  } compose[] = {{'e', 0x0301, 0xE9}, {'a', 0x0300, 0xE0}, {'u', 0x0308, 0xFC}, {'o', 0x0302, 0xF4},
                 {'n', 0x0303, 0xF1}, {'c', 0x0327, 0xE7}, {'A', 0x030A, 0xC5}, {'E', 0x0301, 0xC9}};
  for (const auto& c : compose) rule(std::string(1, c.base) + utf8(c.mark), utf8(c.composed));
  return rules;
}

Status write_xlmr_vocab(format::GgufMetadata& md, int32_t n_tokens) {
  constexpr int32_t kMinTokens = 256;
  if (n_tokens < kMinTokens) {
    return make_error("a synthetic XLM-RoBERTa vocabulary needs at least {} tokens, not {}", kMinTokens, n_tokens);
  }
  const std::vector<std::string> pieces = generate_pieces(static_cast<size_t>(n_tokens) - 5);
  if (pieces.size() + 5 != static_cast<size_t>(n_tokens)) {
    return make_error("synthetic XLM-RoBERTa vocabulary: generated {} pieces, wanted {}", pieces.size(), n_tokens - 5);
  }
  GgufValue::Array tokens, scores, types;
  tokens.reserve(static_cast<size_t>(n_tokens));
  scores.reserve(static_cast<size_t>(n_tokens));
  types.reserve(static_cast<size_t>(n_tokens));
  const auto add = [&](std::string text, float score, int32_t type) {
    tokens.push_back(GgufValue::from_string(std::move(text)));
    scores.push_back(GgufValue::from_f32(score));
    types.push_back(GgufValue::from_i32(type));
  };
  add("<s>", 0.0f, 3), add("<pad>", 0.0f, 3), add("</s>", 0.0f, 3), add("<unk>", 0.0f, 2);
  for (size_t i = 0; i < pieces.size(); ++i) add(pieces[i], score_for_rank(i), 1);
  add("<mask>", 0.0f, 3);

  EDGELM_TRY(std::string blob, build_charsmap(xlmr_charsmap_rules()));
  GgufValue::Array charsmap;
  charsmap.reserve(blob.size());
  for (const char c : blob) charsmap.push_back(GgufValue::from_unsigned(GgufType::u8, static_cast<uint8_t>(c)));

  md.set("tokenizer.ggml.model", GgufValue::from_string("t5"));
  md.set("tokenizer.ggml.pre", GgufValue::from_string("default"));
  md.set("tokenizer.ggml.tokens", GgufValue::from_array(GgufType::string, std::move(tokens)));
  md.set("tokenizer.ggml.scores", GgufValue::from_array(GgufType::f32, std::move(scores)));
  md.set("tokenizer.ggml.token_type", GgufValue::from_array(GgufType::i32, std::move(types)));
  md.set("tokenizer.ggml.add_space_prefix", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.token_type_count", GgufValue::from_u32(1));
  md.set("tokenizer.ggml.remove_extra_whitespaces", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.precompiled_charsmap", GgufValue::from_array(GgufType::u8, std::move(charsmap)));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(0));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(2));
  md.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(3));
  md.set("tokenizer.ggml.seperator_token_id", GgufValue::from_u32(2));
  md.set("tokenizer.ggml.padding_token_id", GgufValue::from_u32(1));
  md.set("tokenizer.ggml.cls_token_id", GgufValue::from_u32(0));
  md.set("tokenizer.ggml.mask_token_id", GgufValue::from_u32(static_cast<uint32_t>(n_tokens - 1)));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(true));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(true));
  return ok_status();
}

}  // namespace edgelm::tokenizer
