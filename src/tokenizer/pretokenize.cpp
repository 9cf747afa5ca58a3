#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>

#include "core/log.h"

namespace edgelm::tokenizer {
namespace {

// ---- The pre-tokenizers, as data. ----------------------------------------------------------
// Regex strings are llama.cpp's (src/llama-vocab.cpp, llm_tokenizer_bpe). Where llama.cpp runs
// a regex through std::regex, it first replaces every non-ASCII whitespace character of the
// text by '\v'; an explicit non-ASCII range in a character class can therefore never match
// such a character there. The three ranges below that contain Unicode spaces are written with
// those spaces cut out, so that PCRE2 agrees; everything else is verbatim (non-ASCII classes
// written as \x{...} escapes, because several of their characters are NFC singletons such as
// U+212A KELVIN SIGN that editors silently normalise).

// GPT-2's own regex.
constexpr std::string_view kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3's regex with the case-insensitive group spelled out (llama.cpp's adaptation).
constexpr std::string_view kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen 2: Llama 3's with single digits.
constexpr std::string_view kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen3.5's (tokenizer.json): Qwen2's with combining marks (\p{M}) kept inside words.
constexpr std::string_view kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// CJK ideographs, U+0800..U+4E00 without its whitespace (U+1680, U+2000-200A, U+2028/9,
// U+202F, U+205F, U+3000), Hangul.
constexpr std::string_view kDeepseekCjk =
    "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}"
    "\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
// Cased letters of many scripts (deepseek-llm's letter class).
constexpr std::string_view kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}"
    "\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}"
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
// ASCII and fullwidth punctuation, curly quotes, U+3001-3002 (the reference's U+3000 is a space).
constexpr std::string_view kDeepseekPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3001}-\\x{3002}]+";

constexpr std::string_view kDefaultRegexes[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
constexpr std::string_view kGpt2Regexes[] = {kGpt2};
constexpr std::string_view kLlama3Regexes[] = {kLlama3};
constexpr std::string_view kQwen2Regexes[] = {kQwen2};
constexpr std::string_view kQwen35Regexes[] = {kQwen35};
constexpr std::string_view kDeepseekLlmRegexes[] = {"[\r\n]", kDeepseekLetters, kDeepseekPunct,
                                                    "\\s+$",  kDeepseekCjk,     "\\p{N}+"};
constexpr std::string_view kDeepseekCoderRegexes[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"};
constexpr std::string_view kFalconRegexes[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
constexpr std::string_view kStarcoderRegexes[] = {"\\p{N}", kGpt2};
constexpr std::string_view kBloomRegexes[] = {
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"};

struct PretokenizerDef {
  std::string_view name;
  std::span<const std::string_view> regexes;
  bool ignore_merges;
  bool add_bos;
};

constexpr PretokenizerDef kDefs[] = {
    {"default", kDefaultRegexes, false, false},
    {"gpt-2", kGpt2Regexes, false, false},
    {"llama-bpe", kLlama3Regexes, true, true},
    {"dbrx", kLlama3Regexes, false, false},  // Llama 3's regex, but merges always apply
    {"qwen2", kQwen2Regexes, false, false},
    {"qwen35", kQwen35Regexes, false, false},
    {"deepseek-llm", kDeepseekLlmRegexes, false, false},
    {"deepseek-coder", kDeepseekCoderRegexes, false, false},
    {"falcon", kFalconRegexes, false, false},
    {"starcoder", kStarcoderRegexes, false, false},
    {"bloom", kBloomRegexes, false, false},
};

// Other tokenizer.ggml.pre names that llama.cpp maps to the same pre-tokenizer.
struct Alias {
  std::string_view alias;
  std::string_view name;
};
constexpr Alias kAliases[] = {
    {"gpt2", "gpt-2"},
    {"phi-2", "gpt-2"},
    {"jina-es", "gpt-2"},
    {"jina-de", "gpt-2"},
    {"gigachat", "gpt-2"},
    {"jina-v1-en", "gpt-2"},
    {"jina-v2-es", "gpt-2"},
    {"jina-v2-de", "gpt-2"},
    {"jina-v2-code", "gpt-2"},
    {"roberta-bpe", "gpt-2"},
    {"mpt", "gpt-2"},
    {"olmo", "gpt-2"},
    {"jais", "gpt-2"},
    {"exaone4", "gpt-2"},
    {"llama3", "llama-bpe"},
    {"llama-v3", "llama-bpe"},
    {"falcon3", "llama-bpe"},
    {"falcon-h1", "llama-bpe"},
    {"pixtral", "llama-bpe"},
    {"midm-2.0", "llama-bpe"},
    {"lfm2", "llama-bpe"},
    {"smaug-bpe", "dbrx"},
    {"deepseek-r1-qwen", "qwen2"},
    {"stablelm2", "qwen2"},
    {"megrez", "qwen2"},
    {"hunyuan", "qwen2"},
    {"refact", "starcoder"},
    {"command-r", "starcoder"},
    {"smollm", "starcoder"},
    {"codeshell", "starcoder"},
    {"exaone", "starcoder"},
    {"minerva-7b", "starcoder"},
    {"poro-chat", "bloom"},
    {"gpt3-finnish", "bloom"},
};

const PretokenizerDef* find_def(std::string_view name) {
  if (name.empty()) name = "default";
  for (const Alias& a : kAliases) {
    if (a.alias == name) {
      name = a.name;
      break;
    }
  }
  for (const PretokenizerDef& d : kDefs) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

// UTF + UCP: Unicode properties. MATCH_INVALID_UTF: any bytes are a valid subject (see the
// header). DOLLAR_ENDONLY: `$` only at the very end, as in ECMAScript (PCRE's default also
// matches before a final newline, which would change deepseek's "\s+$").
constexpr uint32_t kCompileOptions = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;

}  // namespace

// ---- PCRE2 wrapper. ------------------------------------------------------------------------

struct Pcre2Pattern {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Pcre2Pattern() { pcre2_code_free(code); }
};

struct MatchScratch {
  std::vector<pcre2_match_data*> data;  // one per regex: a level's match survives deeper levels
  pcre2_match_context* context = nullptr;
  ~MatchScratch() {
    for (pcre2_match_data* d : data) pcre2_match_data_free(d);
    pcre2_match_context_free(context);
  }
};

namespace {

Result<std::shared_ptr<const Pcre2Pattern>> compile_pattern(std::string_view regex) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  auto p = std::make_shared<Pcre2Pattern>();
  p->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(), kCompileOptions, &error,
                          &error_offset, nullptr);
  if (p->code == nullptr) {
    std::array<PCRE2_UCHAR, 256> message{};
    pcre2_get_error_message(error, message.data(), message.size());
    return make_error("pre-tokenizer regex '{}' does not compile at offset {}: {}", regex, error_offset,
                      reinterpret_cast<const char*>(message.data()));
  }
  // JIT is an optimisation only: where it is unavailable the interpreter gives the same
  // matches, just slower.
  p->jit = pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
  if (!p->jit) EDGELM_LOG_DEBUG("pcre2: no JIT for pre-tokenizer regex '{}'", regex);
  return std::shared_ptr<const Pcre2Pattern>(std::move(p));
}

struct Span {
  size_t begin;
  size_t end;
};

// The leftmost match in subject[start..], or nullopt.
std::optional<Span> find_match(const Pcre2Pattern& p, std::string_view subject, size_t start, uint32_t options,
                               pcre2_match_data* md, pcre2_match_context* context) {
  // PCRE2's default match limit (10 million backtracking steps) is hit by legitimate linear
  // work on long runs: Llama 3's \s*[\r\n]+ backtracks through a whole run of spaces before
  // \s+(?!\S) takes it. The limit grows with the subject so that only true blow-ups stop.
  const uint64_t limit = 10'000'000 + 64 * static_cast<uint64_t>(subject.size());
  pcre2_set_match_limit(context, static_cast<uint32_t>(std::min<uint64_t>(limit, UINT32_MAX)));
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(p.code, s, subject.size(), start, options, md, context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // The JIT's fixed machine stack ran out (deep backtracking); the interpreter keeps its
    // state on the heap and gives the same answer.
    rc = pcre2_match(p.code, s, subject.size(), start, options | PCRE2_NO_JIT, md, context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
  if (rc < 0) {
    // Match or heap limit: the rest of the subject stays one piece, deterministically.
    EDGELM_LOG_WARN("pcre2: pre-tokenizer match failed (error {}); rest of a {}-byte piece left unsplit", rc,
                    subject.size());
    return std::nullopt;
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  return Span{ov[0], ov[1]};
}

// Compiled pre-tokenizers by canonical name. Never destroyed, so that a tokenizer released
// during static destruction still finds its patterns alive.
std::mutex g_cache_mutex;
std::unordered_map<std::string, std::shared_ptr<const Pretokenizer>>& cache() {
  static auto* c = new std::unordered_map<std::string, std::shared_ptr<const Pretokenizer>>();
  return *c;
}

}  // namespace

// ---- Pretokenizer. -------------------------------------------------------------------------

Result<std::shared_ptr<const Pretokenizer>> Pretokenizer::get(std::string_view name) {
  const PretokenizerDef* def = find_def(name);
  if (def == nullptr) {
    return make_error("unknown pre-tokenizer '{}' (supported: {})", name, supported_names());
  }
  std::lock_guard lock(g_cache_mutex);
  auto& c = cache();
  if (const auto it = c.find(std::string(def->name)); it != c.end()) return it->second;
  std::vector<std::string> regexes(def->regexes.begin(), def->regexes.end());
  EDGELM_TRY(auto pre, from_regexes(std::string(def->name), std::move(regexes), def->ignore_merges, def->add_bos));
  c.emplace(def->name, pre);
  return pre;
}

Result<std::shared_ptr<const Pretokenizer>> Pretokenizer::from_regexes(std::string name,
                                                                       std::vector<std::string> regexes,
                                                                       bool ignore_merges, bool add_bos) {
  std::shared_ptr<Pretokenizer> pre(new Pretokenizer());
  pre->name_ = std::move(name);
  pre->ignore_merges_ = ignore_merges;
  pre->add_bos_ = add_bos;
  for (const std::string& r : regexes) {
    EDGELM_TRY(auto p, compile_pattern(r));
    pre->patterns_.push_back(std::move(p));
  }
  return std::shared_ptr<const Pretokenizer>(std::move(pre));
}

std::string Pretokenizer::supported_names() {
  std::string out;
  for (const PretokenizerDef& d : kDefs) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  out += "; aliases: ";
  for (size_t i = 0; i < std::size(kAliases); ++i) {
    if (i > 0) out += ", ";
    out += kAliases[i].alias;
  }
  return out;
}

bool Pretokenizer::jit() const {
  for (const auto& p : patterns_) {
    if (!p->jit) return false;
  }
  return true;
}

void Pretokenizer::split(std::string_view text, const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  MatchScratch scratch;
  scratch.context = pcre2_match_context_create(nullptr);
  EDGELM_CHECK(scratch.context != nullptr, "out of memory allocating a PCRE2 match context");
  for (size_t i = 0; i < patterns_.size(); ++i) {
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    EDGELM_CHECK(md != nullptr, "out of memory allocating PCRE2 match data");
    scratch.data.push_back(md);
  }
  // Depth first: each piece goes through the remaining regexes as soon as it is cut, so no
  // list of all pieces of a large text is ever built.
  split_level(0, text, scratch, emit);
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  split(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

void Pretokenizer::split_level(size_t level, std::string_view piece, MatchScratch& scratch,
                               const std::function<void(std::string_view)>& emit) const {
  if (level == patterns_.size()) {
    emit(piece);
    return;
  }
  const auto next = [&](size_t begin, size_t end) {
    if (end > begin) split_level(level + 1, piece.substr(begin, end - begin), scratch, emit);
  };
  const Pcre2Pattern& pattern = *patterns_[level];
  size_t cut = 0;     // start of the text not yet passed on
  size_t search = 0;  // where the next match may start
  uint32_t options = 0;
  while (search <= piece.size()) {
    const auto m = find_match(pattern, piece, search, options, scratch.data[level], scratch.context);
    if (!m) break;
    next(cut, m->begin);
    next(m->begin, m->end);
    cut = search = m->end;
    // An empty match only cuts; then look for a non-empty one at the same place (as
    // std::regex_iterator does), which also guarantees progress.
    options = m->end == m->begin ? PCRE2_NOTEMPTY_ATSTART : 0;
  }
  next(cut, piece.size());
}

}  // namespace edgelm::tokenizer
