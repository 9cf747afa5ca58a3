// WordNet 3.0 database files -> the compact tables of wordnet.h.
//
// File formats (wndb(5WN)): index lines are "lemma pos synset_cnt p_cnt [ptr_symbol...]
// sense_cnt tagsense_cnt synset_offset...", senses in frequency order; data lines are
// "offset lex_filenum ss_type w_cnt word lex_id... p_cnt [symbol offset pos source/target]... |
// gloss", w_cnt in hex, source/target two hex bytes of 1-based word numbers (0000: the whole
// synset); exception lines are "inflected base...". Lines starting with a space are the licence.
#include "cache/wordnet.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <unordered_map>

#ifdef __GLIBC__
#endif

#include "cache/normalize_key.h"
#include "core/heap_trim.h"
#include "core/mmap_file.h"

namespace edgelm::cache {
namespace {

constexpr std::array<const char*, 4> kPosNames = {"noun", "verb", "adj", "adv"};

int pos_index(char c) {
  switch (c) {
    case 'n': return 0;
    case 'v': return 1;
    case 'a':
    case 's': return 2;
    case 'r': return 3;
    default: return -1;
  }
}

// Splits on single spaces (the files' separator), skipping empty fields.
struct Fields {
  std::string_view rest;
  std::string_view next() {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const size_t end = rest.find(' ');
    const std::string_view f = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    return f;
  }
};

bool parse_uint(std::string_view s, uint32_t& out, int base = 10) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

// A lemma as the cache spells it: lower case, '-' and ' ' as '_', at most two words, letters and
// apostrophes only; "" when it is not one we keep.
std::string canonical_lemma(std::string_view w) {
  if (const size_t paren = w.find('('); paren != std::string_view::npos) w = w.substr(0, paren);  // "open(a)"
  std::string out;
  out.reserve(w.size());
  int n_sep = 0;
  for (const char c : w) {
    if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || c == '\'') {
      out += c;
    } else if (c == '_' || c == '-') {
      if (out.empty() || out.back() == '_') return "";
      out += '_';
      ++n_sep;
    } else {
      return "";
    }
  }
  if (out.empty() || out.back() == '_' || n_sep > 1) return "";
  return out;
}

uint64_t synset_key(int pos, uint32_t offset) { return (static_cast<uint64_t>(pos) << 32) | offset; }

}  // namespace

// Builds a WordNet from the files; the temporary pointer tables die with it.
class WordNetLoader {
 public:
  explicit WordNetLoader(std::string dir) : dir_(std::move(dir)), wn_(new WordNet()) {}

  Result<std::shared_ptr<const WordNet>> run() {
    for (int p = 0; p < 4; ++p)
      if (auto st = read_index(p); !st.ok()) return st.error();
    finish_lemmas();
    for (int p = 0; p < 4; ++p)
      if (auto st = read_data(p); !st.ok()) return st.error();
    build_opposites();
    for (const int p : {1, 0, 2, 3})  // verbs first: "left" -> "leave" before the adjective
      if (auto st = read_exceptions(p); !st.ok()) return st.error();
    std::stable_sort(wn_->exceptions_.begin(), wn_->exceptions_.end(),
                     [](const WordNet::Exception& a, const WordNet::Exception& b) { return a.form < b.form; });
    wn_->n_synsets_ = synset_ids_.size();
    synset_ids_ = {};
    wn_->text_.shrink_to_fit();
    wn_->sense_pool_.shrink_to_fit();
    wn_->exceptions_.shrink_to_fit();
    release_temporaries();
    return std::shared_ptr<const WordNet>(wn_.release());
  }

 private:
  Result<MappedFile> open(const std::string& name) {
    const std::string path = dir_ + "/" + name;
    Result<MappedFile> f = MappedFile::open(path, FileAccess::read);
    if (!f.ok())
      return make_error(
          "WordNet file '{}' cannot be read ({}): install the Debian package wordnet-base "
          "(apt-get install wordnet-base) or set the WordNet folder",
          path, f.error().message);
    return f;
  }

  template <typename Fn>
  static Status for_lines(const MappedFile& f, Fn&& fn) {
    std::string_view all(reinterpret_cast<const char*>(f.data()), f.size());
    size_t line_no = 0;
    while (!all.empty()) {
      ++line_no;
      const size_t nl = all.find('\n');
      std::string_view line = all.substr(0, nl);
      all.remove_prefix(nl == std::string_view::npos ? all.size() : nl + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || line.front() == ' ') continue;  // licence header
      if (!fn(line)) return make_error("WordNet file '{}': line {} is malformed", f.path(), line_no);
    }
    return ok_status();
  }

  uint32_t synset_id(int pos, uint32_t offset) {
    auto [it, fresh] = synset_ids_.try_emplace(synset_key(pos, offset), static_cast<uint32_t>(synset_ids_.size()));
    return it->second;
  }

  int32_t lemma_id_for(const std::string& lemma) {
    auto [it, fresh] = lemma_ids_.try_emplace(lemma, static_cast<int32_t>(lemmas_.size()));
    if (fresh) {
      lemmas_.push_back(lemma);
      pos_.push_back(0);
      senses_.emplace_back();
    }
    return it->second;
  }

  Status read_index(int p) {
    EDGELM_TRY(MappedFile f, open(std::string("index.") + kPosNames[static_cast<size_t>(p)]));
    return for_lines(f, [&](std::string_view line) {
      Fields fs{line};
      const std::string lemma = canonical_lemma(fs.next());
      (void)fs.next();  // pos
      uint32_t n_synsets = 0, n_ptrs = 0;
      if (!parse_uint(fs.next(), n_synsets) || !parse_uint(fs.next(), n_ptrs)) return false;
      for (uint32_t i = 0; i < n_ptrs; ++i) (void)fs.next();
      (void)fs.next();  // sense_cnt (= synset_cnt)
      (void)fs.next();  // tagsense_cnt
      if (lemma.empty()) return true;
      const int32_t id = lemma_id_for(lemma);
      pos_[static_cast<size_t>(id)] |= static_cast<uint8_t>(1u << p);
      for (uint32_t i = 0; i < n_synsets; ++i) {
        uint32_t off = 0;
        if (!parse_uint(fs.next(), off)) return false;
        if (i < static_cast<uint32_t>(WordNet::kMaxSensesPerPos))
          senses_[static_cast<size_t>(id)].push_back(synset_id(p, off) | (i << 24));
      }
      return true;
    });
  }

  // Moves the lemmas into the WordNet's arena, hash table and sense pool.
  void finish_lemmas() {
    WordNet& w = *wn_;
    const size_t n = lemmas_.size();
    w.lemma_begin_.reserve(n + 1);
    w.sense_begin_.reserve(n + 1);
    for (size_t i = 0; i < n; ++i) {
      w.lemma_begin_.push_back(static_cast<uint32_t>(w.text_.size()));
      w.text_ += lemmas_[i];
      w.sense_begin_.push_back(static_cast<uint32_t>(w.sense_pool_.size()));
      // Index files come noun, verb, adj, adv: the senses are already grouped by part of speech.
      for (const uint32_t s : senses_[i]) w.sense_pool_.push_back(s);
    }
    w.lemma_begin_.push_back(static_cast<uint32_t>(w.text_.size()));
    w.sense_begin_.push_back(static_cast<uint32_t>(w.sense_pool_.size()));
    w.pos_ = std::move(pos_);
    size_t cap = 1;
    while (cap < 2 * n) cap <<= 1;
    w.table_.assign(cap, -1);
    for (size_t i = 0; i < n; ++i) {
      size_t slot = fnv1a64(lemmas_[i]) & (cap - 1);
      while (w.table_[slot] >= 0) slot = (slot + 1) & (cap - 1);
      w.table_[slot] = static_cast<int32_t>(i);
    }
    senses_.clear();
    senses_.shrink_to_fit();
    lemmas_.clear();
    lemmas_.shrink_to_fit();
    lemma_ids_ = {};
  }

  struct LexPtr {
    uint32_t src_synset;
    uint16_t src_word;  // 1-based; 0: every member
    uint32_t dst_synset;
    uint16_t dst_word;
  };

  Status read_data(int p) {
    EDGELM_TRY(MappedFile f, open(std::string("data.") + kPosNames[static_cast<size_t>(p)]));
    return for_lines(f, [&](std::string_view line) {
      const size_t bar = line.find(" | ");
      Fields fs{line.substr(0, bar)};
      uint32_t off = 0, n_words = 0, n_ptrs = 0;
      if (!parse_uint(fs.next(), off)) return false;
      (void)fs.next();  // lex_filenum
      const std::string_view ss_type = fs.next();
      if (ss_type.size() != 1 || pos_index(ss_type[0]) != p) return false;
      if (!parse_uint(fs.next(), n_words, 16)) return false;
      const uint32_t sid = synset_id(p, off);
      if (members_.size() <= sid) members_.resize(sid + 1);
      std::vector<int32_t>& mem = members_[sid];
      mem.clear();
      for (uint32_t i = 0; i < n_words; ++i) {
        const std::string lemma = canonical_lemma(fs.next());
        (void)fs.next();  // lex_id
        mem.push_back(lemma.empty() ? -1 : wn_->find(lemma));
      }
      if (!parse_uint(fs.next(), n_ptrs)) return false;
      for (uint32_t i = 0; i < n_ptrs; ++i) {
        const std::string_view sym = fs.next();
        uint32_t dst_off = 0, st = 0;
        if (!parse_uint(fs.next(), dst_off)) return false;
        const std::string_view dst_pos = fs.next();
        if (!parse_uint(fs.next(), st, 16) || dst_pos.size() != 1 || pos_index(dst_pos[0]) < 0) return false;
        if (sym != "!" && sym != "&" && sym != "+") continue;
        const LexPtr ptr{sid, static_cast<uint16_t>(st >> 8), synset_id(pos_index(dst_pos[0]), dst_off),
                         static_cast<uint16_t>(st & 0xff)};
        if (sym == "!") antonyms_.push_back(ptr);
        if (sym == "&") similar_.push_back(ptr);
        if (sym == "+") derivations_.push_back(ptr);
      }
      return true;
    });
  }

  int32_t member(uint32_t synset, uint16_t word) const {
    if (synset >= members_.size() || word == 0 || word > members_[synset].size()) return -1;
    return members_[synset][word - 1u];
  }

  // One side of an antonym pair: the synset's members, its similar-to neighbours' members, and
  // the derivationally related forms of all of them.
  std::vector<int32_t> side(uint32_t synset) const {
    std::vector<int32_t> out;
    std::vector<uint32_t> synsets = {synset};
    auto range = [](const std::vector<LexPtr>& v, uint32_t s) {
      return std::equal_range(v.begin(), v.end(), LexPtr{s, 0, 0, 0},
                              [](const LexPtr& a, const LexPtr& b) { return a.src_synset < b.src_synset; });
    };
    for (auto [b, e] = range(similar_, synset); b != e; ++b) synsets.push_back(b->dst_synset);
    for (const uint32_t s : synsets) {
      if (s < members_.size())
        for (const int32_t m : members_[s]) out.push_back(m);
      for (auto [b, e] = range(derivations_, s); b != e; ++b) out.push_back(member(b->dst_synset, b->dst_word));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (!out.empty() && out.front() < 0) out.erase(out.begin());
    return out;
  }

  void build_opposites() {
    auto by_src = [](const LexPtr& a, const LexPtr& b) { return a.src_synset < b.src_synset; };
    std::sort(similar_.begin(), similar_.end(), by_src);
    std::sort(derivations_.begin(), derivations_.end(), by_src);
    std::vector<uint64_t>& out = wn_->opposites_;
    for (const LexPtr& a : antonyms_) {
      const std::vector<int32_t> xs = side(a.src_synset), ys = side(a.dst_synset);
      for (const int32_t x : xs)
        for (const int32_t y : ys) {
          if (x == y) continue;
          const auto lo = static_cast<uint64_t>(std::min(x, y)), hi = static_cast<uint64_t>(std::max(x, y));
          out.push_back(lo << 32 | hi);
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    out.shrink_to_fit();
    members_.clear();
    members_.shrink_to_fit();
    antonyms_ = {};
    similar_ = {};
    derivations_ = {};
  }

  Status read_exceptions(int p) {
    EDGELM_TRY(MappedFile f, open(std::string(kPosNames[static_cast<size_t>(p)]) + ".exc"));
    return for_lines(f, [&](std::string_view line) {
      Fields fs{line};
      const std::string form = canonical_lemma(fs.next());
      if (form.empty()) return true;
      for (std::string_view b = fs.next(); !b.empty(); b = fs.next()) {
        const int32_t base = wn_->find(canonical_lemma(b));
        if (base >= 0 && base != wn_->find(form))
          wn_->exceptions_.push_back({form, base, static_cast<uint8_t>(1u << p)});
      }
      return true;
    });
  }

  // The loader's maps and vectors are freed by now; hand their pages back to the system so the
  // process keeps only the tables (glibc keeps freed heap otherwise).
  static void release_temporaries() {
    release_free_heap();
  }

  std::string dir_;
  std::unique_ptr<WordNet> wn_;
  std::unordered_map<uint64_t, uint32_t> synset_ids_;
  std::unordered_map<std::string, int32_t> lemma_ids_;
  std::vector<std::string> lemmas_;
  std::vector<uint8_t> pos_;
  std::vector<std::vector<uint32_t>> senses_;
  std::vector<std::vector<int32_t>> members_;  // by synset id: lemma ids (-1: not kept)
  std::vector<LexPtr> antonyms_, similar_, derivations_;
};

Result<std::shared_ptr<const WordNet>> WordNet::load(const std::string& dir) { return WordNetLoader(dir).run(); }

size_t WordNet::bytes() const {
  size_t n = text_.capacity() + lemma_begin_.capacity() * 4 + pos_.capacity() + sense_begin_.capacity() * 4 +
             sense_pool_.capacity() * 4 + table_.capacity() * 4 + opposites_.capacity() * 8 +
             exceptions_.capacity() * sizeof(Exception);
  for (const Exception& e : exceptions_) n += e.form.capacity() > 15 ? e.form.capacity() : 0;
  return n;
}

int32_t WordNet::find(std::string_view lemma) const {
  if (table_.empty() || lemma.empty()) return -1;
  const size_t mask = table_.size() - 1;
  for (size_t slot = fnv1a64(lemma) & mask;; slot = (slot + 1) & mask) {
    const int32_t id = table_[slot];
    if (id < 0) return -1;
    if (this->lemma(id) == lemma) return id;
  }
}

std::string_view WordNet::lemma(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= n_lemmas()) return {};
  const uint32_t b = lemma_begin_[static_cast<size_t>(id)], e = lemma_begin_[static_cast<size_t>(id) + 1];
  return std::string_view(text_).substr(b, e - b);
}

std::span<const uint32_t> WordNet::senses(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= n_lemmas()) return {};
  const uint32_t b = sense_begin_[static_cast<size_t>(id)], e = sense_begin_[static_cast<size_t>(id) + 1];
  return std::span<const uint32_t>(sense_pool_).subspan(b, e - b);
}

bool WordNet::opposite(int32_t a, int32_t b) const {
  if (a < 0 || b < 0 || a == b) return false;
  const uint64_t key = static_cast<uint64_t>(std::min(a, b)) << 32 | static_cast<uint64_t>(std::max(a, b));
  return std::binary_search(opposites_.begin(), opposites_.end(), key);
}

namespace {
struct Rule {
  std::string_view suffix, ending;
};
constexpr Rule kNounRules[] = {{"s", ""},      {"ses", "s"},   {"xes", "x"},   {"zes", "z"},
                               {"ches", "ch"}, {"shes", "sh"}, {"men", "man"}, {"ies", "y"}};
constexpr Rule kVerbRules[] = {{"s", ""},   {"ies", "y"}, {"es", "e"},  {"es", ""},
                               {"ed", "e"}, {"ed", ""},   {"ing", "e"}, {"ing", ""}};
constexpr Rule kAdjRules[] = {{"er", ""}, {"est", ""}, {"er", "e"}, {"est", "e"}};
}  // namespace

std::vector<std::string> WordNet::base_forms(std::string_view word) const {
  std::vector<std::string> out;
  if (word.size() <= 3) return out;
  for (auto it = std::lower_bound(exceptions_.begin(), exceptions_.end(), word,
                                  [](const Exception&e, std::string_view w) { return e.form < w; });
       it != exceptions_.end() && it->form == word; ++it)
    out.emplace_back(lemma(it->base));
  auto apply = [&](std::span<const Rule> rules, uint8_t pos) {
    for (const Rule& r : rules) {
      if (word.size() <= r.suffix.size() + 1 || !word.ends_with(r.suffix)) continue;
      std::string cand(word.substr(0, word.size() - r.suffix.size()));
      cand += r.ending;
      if (pos_mask(find(cand)) & pos) out.push_back(std::move(cand));
    }
  };
  apply(kNounRules, noun);
  apply(kVerbRules, verb);
  apply(kAdjRules, adj);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string WordNet::lemmatize(std::string_view word) const {
  if (word.size() <= 3) return std::string(word);
  // A word that already is a lemma of a part of speech is not reduced as an inflection of that
  // part of speech ("after" is no comparative of "aft", "glasses" stays; "opening" -> "open").
  const uint8_t own = pos_mask(find(word));
  for (auto it = std::lower_bound(exceptions_.begin(), exceptions_.end(), word,
                                  [](const Exception&e, std::string_view w) { return e.form < w; });
       it != exceptions_.end() && it->form == word; ++it)
    if (!(own & it->pos)) return std::string(lemma(it->base));
  auto apply = [&](std::span<const Rule> rules, uint8_t pos, std::string& out) {
    if (own & pos) return false;
    for (const Rule& r : rules) {
      if (word.size() <= r.suffix.size() + 1 || !word.ends_with(r.suffix)) continue;
      std::string cand(word.substr(0, word.size() - r.suffix.size()));
      cand += r.ending;
      if (pos_mask(find(cand)) & pos) {
        out = std::move(cand);
        return true;
      }
    }
    return false;
  };
  std::string out;
  if (apply(kNounRules, noun, out) || apply(kVerbRules, verb, out) || apply(kAdjRules, adj, out)) return out;
  return std::string(word);
}

}  // namespace edgelm::cache
