#include "cache/normalize_key.h"

#include <utf8proc.h>

#include <cstdlib>

namespace edgelm::cache {
namespace {

bool is_white_space(utf8proc_int32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// Replaces invalid UTF-8 by U+FFFD so utf8proc accepts the text.
std::string sanitize_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(in.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(in.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {
      out += "\xEF\xBF\xBD";
      n = 1;
    } else {
      out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    }
    p += n;
    left -= n;
  }
  return out;
}

}  // namespace

std::string normalize_text(std::string_view text, bool case_fold) {
  const std::string clean = sanitize_utf8(text);
  utf8proc_uint8_t* mapped = nullptr;
  int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  if (case_fold) options |= UTF8PROC_CASEFOLD;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(clean.data()),
                                          static_cast<utf8proc_ssize_t>(clean.size()), &mapped,
                                          static_cast<utf8proc_option_t>(options));
  std::string nfkc = n >= 0 ? std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n)) : clean;
  std::free(mapped);
  // Collapse whitespace.
  std::string out;
  out.reserve(nfkc.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(nfkc.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(nfkc.size());
  bool pending_space = false;
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t len = utf8proc_iterate(p, left, &cp);
    if (len <= 0) len = 1;  // cannot happen after sanitize; be safe
    if (is_white_space(cp)) {
      pending_space = !out.empty();
    } else {
      if (pending_space) out += ' ';
      pending_space = false;
      out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    }
    p += len;
    left -= len;
  }
  return out;
}

std::string exact_key(const KeyParts& parts, bool case_fold) {
  std::string key = parts.model;
  key += '\x1f';
  key += normalize_text(parts.prompt, case_fold);
  key += '\x1f';
  key += parts.params;
  return key;
}

std::vector<std::string> query_words(std::string_view text, bool case_fold) {
  const std::string norm = normalize_text(text, case_fold);
  std::vector<std::string> raw;
  std::string cur;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(norm.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(norm.size());
  auto flush = [&] {
    while (!cur.empty() && cur.back() == '\'') cur.pop_back();
    size_t start = 0;
    while (start < cur.size() && cur[start] == '\'') ++start;
    if (start < cur.size()) raw.push_back(cur.substr(start));
    cur.clear();
  };
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t len = utf8proc_iterate(p, left, &cp);
    if (len <= 0) len = 1;
    const utf8proc_category_t cat = utf8proc_category(cp);
    const bool alnum = (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                       (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
                       (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME);
    if (cp == '\'' || cp == 0x2019) {
      cur += '\'';
    } else if (alnum) {
      cur.append(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    } else {
      flush();
    }
    p += len;
    left -= len;
  }
  flush();
  std::vector<std::string> out;
  for (std::string& w : raw) {
    const size_t apos = w.find('\'');
    if (apos == std::string::npos) {
      out.push_back(std::move(w));
      continue;
    }
    std::string lower;
    for (const char c : w) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower.size() >= 3 && lower.compare(lower.size() - 3, 3, "n't") == 0) {
      std::string stem = w.substr(0, w.size() - 3);
      const std::string ls = lower.substr(0, lower.size() - 3);
      if (ls == "ca") stem += "n";          // can't
      else if (ls == "wo") stem = "will";   // won't
      else if (ls == "sha") stem += "ll";   // shan't
      if (!stem.empty()) out.push_back(stem);
      out.push_back("not");
      continue;
    }
    std::string stem = w.substr(0, apos);  // drop 's 're 'll 've 'd 'm and the like
    if (!stem.empty()) out.push_back(stem);
  }
  return out;
}

std::string light_stem(std::string_view w) {
  if (w.size() <= 3 || w.back() != 's') return std::string(w);
  const char prev = w[w.size() - 2];
  if (prev == 's' || prev == 'u' || prev == 'i') return std::string(w);
  return std::string(w.substr(0, w.size() - 1));
}

uint64_t fnv1a64(std::string_view s, uint64_t seed) {
  uint64_t h = seed;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace edgelm::cache
