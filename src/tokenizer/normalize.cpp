#include "tokenizer/normalize.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// The White_Space property (what BERT's clean step and its pre-tokenizer split on).
bool is_whitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r');
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// BERT's "Chinese character" blocks. 0x2B920 (not 0x2B820) is what the reference implementation
// uses for the Extension E block, so U+2B820..U+2B91F are not isolated there, nor here.
bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Characters the clean step drops: control, format and private use. Unassigned code points (Cn)
// are kept, as the reference does; they end up as [UNK] words.
bool is_dropped_category(utf8proc_category_t c) {
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
         c == UTF8PROC_CATEGORY_CS;
}

// The code point of a character that utf8_next() reported valid (so no checks are needed).
char32_t decode_valid(std::string_view s, size_t pos, size_t len) {
  const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(s[pos + i])); };
  switch (len) {
    case 2: return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
    case 3: return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    default: return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
  }
}

// The normalization steps of normalize.h, feeding normalized code points to `sink`, which takes
// put(char32_t). Spaces the sink receives are real separators (from whitespace or CJK padding).
//
// Canonical ordering: NFD sorts each run of combining marks (ccc > 0) by ccc. Marks that are Mn
// are dropped anyway, so only the kept ones (spacing marks such as U+302E or U+1D165) need to be
// held back in `marks_` until the run ends at the next starter (ccc 0, dropped or not); a stable
// sort of the kept subset gives the same order as sorting the run and then dropping the Mn.
template <typename Sink>
class Normalizer {
 public:
  explicit Normalizer(Sink& sink) : sink_(sink) {}

  void run(std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
      const auto lead = static_cast<uint8_t>(text[pos]);
      if (lead < 0x80) {
        ascii(lead);
        ++pos;
        continue;
      }
      const Utf8Step step = utf8_next(text, pos);
      // Invalid or truncated bytes become U+FFFD, which the clean step drops.
      const char32_t cp = step.status == Utf8Status::valid ? decode_valid(text, pos, step.length) : kReplacement;
      pos += step.length;
      other(cp);
    }
    flush_marks();
  }

 private:
  // ASCII is its own NFD, has no marks and lower-cases by table: no Unicode lookups needed.
  void ascii(uint8_t c) {
    if (!marks_.empty()) flush_marks();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      sink_.put(' ');
    } else if (c < 0x20 || c == 0x7F) {
      // Control characters (NUL, \v, \f and the rest) are dropped, not turned into spaces.
    } else {
      sink_.put(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
  }

  void other(char32_t cp) {
    if (cp == kReplacement) return;
    const utf8proc_property_t* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    if (is_dropped_category(static_cast<utf8proc_category_t>(prop->category))) return;
    if (is_whitespace(cp)) {
      flush_marks();
      sink_.put(' ');
      return;
    }
    // Padding comes before NFD, as in the reference: compatibility ideographs (U+F900...) are
    // padded, then decompose to unified ones.
    const bool cjk = is_cjk(cp);
    if (cjk) {
      flush_marks();
      sink_.put(' ');
    }
    std::array<utf8proc_int32_t, 8> buf;  // canonical decompositions are at most 4 long
    const utf8proc_ssize_t n =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf.data(),
                                static_cast<utf8proc_ssize_t>(buf.size()), UTF8PROC_DECOMPOSE, nullptr);
    if (n <= 0 || n > static_cast<utf8proc_ssize_t>(buf.size())) {
      decomposed(cp);  // cannot happen for a valid scalar value; keep the character as is
    } else {
      for (utf8proc_ssize_t i = 0; i < n; ++i) decomposed(static_cast<char32_t>(buf[static_cast<size_t>(i)]));
    }
    if (cjk) {
      flush_marks();
      sink_.put(' ');
    }
  }

  void decomposed(char32_t cp) {
    const utf8proc_property_t* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    if (prop->combining_class == 0) flush_marks();
    if (prop->category == UTF8PROC_CATEGORY_MN) return;  // strip accents
    if (prop->combining_class != 0) {
      marks_.push_back(cp);
      return;
    }
    sink_.put(lower(cp));
  }

  void flush_marks() {
    if (marks_.empty()) return;
    std::stable_sort(marks_.begin(), marks_.end(), [](char32_t a, char32_t b) {
      return utf8proc_get_property(static_cast<utf8proc_int32_t>(a))->combining_class <
             utf8proc_get_property(static_cast<utf8proc_int32_t>(b))->combining_class;
    });
    for (const char32_t m : marks_) sink_.put(lower(m));
    marks_.clear();
  }

  static char32_t lower(char32_t cp) {
    return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
  }

  Sink& sink_;
  std::vector<char32_t> marks_;  // kept combining marks (ccc > 0) of the current run
};

// Appends code points as UTF-8.
struct TextSink {
  std::string& out;
  void put(char32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      utf8_append(out, cp);
    }
  }
};

// The pre-tokenizer: words separated by one ' ', punctuation isolated.
struct WordSink {
  std::string& out;
  void end_word() {
    if (!out.empty() && out.back() != ' ') out.push_back(' ');
  }
  void put(char32_t cp) {
    if (is_whitespace(cp)) {
      end_word();
    } else if (bert_is_punctuation(cp)) {
      end_word();
      TextSink{out}.put(cp);
      end_word();
    } else {
      TextSink{out}.put(cp);
    }
  }
};

}  // namespace

bool bert_is_punctuation(char32_t cp) {
  if (cp < 0x80) {
    // The ASCII symbols count too ($, +, <, =, >, ^, `, |, ~ are not P* in Unicode).
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  }
  // utf8proc numbers the seven P* categories consecutively, Pc through Po.
  static_assert(UTF8PROC_CATEGORY_PO - UTF8PROC_CATEGORY_PC == 6);
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

std::string bert_normalize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  TextSink sink{out};
  Normalizer<TextSink>(sink).run(text);
  return out;
}

std::string bert_pretokenize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  WordSink sink{out};
  Normalizer<WordSink>(sink).run(text);
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace edgelm::tokenizer
