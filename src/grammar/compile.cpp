// Syntax tree -> Program: rule resolution, lowering of groups and repetitions to helper rules,
// the left-recursion check, and the per-position closures (program.h).
//
// Lowering (X is a single element: a class, a rule reference, or a helper rule for a group):
//   x{m,n}  ->  X ... X (m times) O_k   with k = n - m and  O_j ::= X O_{j-1} | ""  (O_0 absent)
//   x{m,}   ->  X ... X (m times) S     with                S   ::= X S | ""
// so a bound n costs O(n) elements and helper rules, and the tail calls keep stacks flat.
// Closures: closure(q) is computed once per position by memoized recursion; left recursion is
// rejected first, so the recursion terminates. The total closure size is bounded (kMaxReps).
#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "grammar/gbnf_ast.h"
#include "grammar/grammar.h"
#include "grammar/program.h"

namespace edgelm::grammar {
namespace detail {
namespace {

constexpr size_t kMaxReps = 4'000'000;  // total closure entries: a bound on ambiguity blow-up

struct RuleBuild {
  std::string name;
  int32_t owner;  // the user rule this helper was generated for (itself for user rules)
  std::vector<std::vector<Elem>> alts;
};

class Compiler {
 public:
  Result<std::unique_ptr<Program>> compile(const std::vector<RuleDef>& defs, std::string_view root) {
    for (const RuleDef& d : defs) {
      if (ids_.count(d.name)) return make_error("{}:{}: rule '{}' is defined twice", d.line, d.col, d.name);
      ids_[d.name] = static_cast<int32_t>(rules_.size());
      rules_.push_back({d.name, static_cast<int32_t>(rules_.size()), {}});
    }
    auto root_it = ids_.find(std::string(root));
    if (root_it == ids_.end()) return make_error("1:1: missing root rule '{}'", root);
    for (const RuleDef& d : defs) {
      const int32_t id = ids_[d.name];
      owner_ = id;
      for (const Expr& seq : d.body.children) {
        std::vector<Elem> alt;
        EDGELM_TRY_STATUS(lower(seq, alt));
        rules_[id].alts.push_back(std::move(alt));
      }
    }
    EDGELM_TRY_STATUS(check_left_recursion(defs));

    auto p = std::make_unique<Program>();
    p->elems.push_back({ElemKind::kRule, static_cast<uint32_t>(root_it->second)});
    p->elems.push_back({ElemKind::kEnd, 0});
    for (RuleBuild& r : rules_) {
      p->rule_names.push_back(r.name);
      std::vector<uint32_t> starts;
      for (const std::vector<Elem>& alt : r.alts) {
        starts.push_back(static_cast<uint32_t>(p->elems.size()));
        p->elems.insert(p->elems.end(), alt.begin(), alt.end());
        p->elems.push_back({ElemKind::kEnd, 0});
      }
      p->alt_starts.push_back(std::move(starts));
    }
    p->classes = std::move(classes_);
    compute_min_tails(*p);
    EDGELM_TRY_STATUS(build_closures(*p));
    return p;
  }

 private:
  uint32_t class_id(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    auto it = class_ids_.find(ranges);
    if (it != class_ids_.end()) return it->second;
    CharClass c;
    c.ranges = ranges;
    for (const auto& [lo, hi] : ranges)
      for (uint32_t cp = lo; cp <= hi && cp < 128; ++cp) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
    const uint32_t id = static_cast<uint32_t>(classes_.size());
    classes_.push_back(std::move(c));
    class_ids_.emplace(ranges, id);
    return id;
  }

  int32_t new_helper(std::string suffix) {
    const int32_t id = static_cast<int32_t>(rules_.size());
    rules_.push_back({rules_[owner_].name + "-" + suffix + std::to_string(id), owner_, {}});
    return id;
  }

  // Appends the elements of `e` to `out`.
  Status lower(const Expr& e, std::vector<Elem>& out) {
    switch (e.kind) {
      case Expr::Kind::kChars: out.push_back({ElemKind::kChar, class_id(e.ranges)}); return ok_status();
      case Expr::Kind::kRef: {
        auto it = ids_.find(e.name);
        if (it == ids_.end()) return make_error("{}:{}: undefined rule '{}'", e.line, e.col, e.name);
        out.push_back({ElemKind::kRule, static_cast<uint32_t>(it->second)});
        return ok_status();
      }
      case Expr::Kind::kSeq:
        for (const Expr& c : e.children) EDGELM_TRY_STATUS(lower(c, out));
        return ok_status();
      case Expr::Kind::kAlt: {
        if (e.children.size() == 1) return lower(e.children[0], out);
        const int32_t h = new_helper("alt");
        for (const Expr& c : e.children) {
          std::vector<Elem> alt;
          EDGELM_TRY_STATUS(lower(c, alt));
          rules_[h].alts.push_back(std::move(alt));
        }
        out.push_back({ElemKind::kRule, static_cast<uint32_t>(h)});
        return ok_status();
      }
      case Expr::Kind::kRepeat: return lower_repeat(e, out);
    }
    return ok_status();
  }

  // One element standing for `e`.
  Result<Elem> atom(const Expr& e) {
    std::vector<Elem> seq;
    EDGELM_TRY_STATUS(lower(e, seq));
    if (seq.size() == 1) return seq[0];
    const int32_t h = new_helper("grp");
    rules_[h].alts.push_back(std::move(seq));
    return Elem{ElemKind::kRule, static_cast<uint32_t>(h)};
  }

  Status lower_repeat(const Expr& e, std::vector<Elem>& out) {
    if (e.max == 0) return ok_status();  // x{0}: nothing
    EDGELM_TRY(const Elem x, atom(e.children[0]));
    for (uint32_t i = 0; i < e.min; ++i) out.push_back(x);
    if (e.max == kRepeatInf) {
      const int32_t s = new_helper("star");
      rules_[s].alts.push_back({x, Elem{ElemKind::kRule, static_cast<uint32_t>(s)}});
      rules_[s].alts.push_back({});
      out.push_back({ElemKind::kRule, static_cast<uint32_t>(s)});
    } else if (e.max > e.min) {
      int32_t prev = -1;
      for (uint32_t j = 1; j <= e.max - e.min; ++j) {
        const int32_t o = new_helper("opt");
        std::vector<Elem> a = {x};
        if (prev >= 0) a.push_back({ElemKind::kRule, static_cast<uint32_t>(prev)});
        rules_[o].alts.push_back(std::move(a));
        rules_[o].alts.push_back({});
        prev = o;
      }
      out.push_back({ElemKind::kRule, static_cast<uint32_t>(prev)});
    }
    return ok_status();
  }

  Status check_left_recursion(const std::vector<RuleDef>& defs) {
    const size_t n = rules_.size();
    std::vector<uint8_t> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : rules_[r].alts) {
          const bool all = std::all_of(alt.begin(), alt.end(),
                                       [&](const Elem& el) { return el.kind == ElemKind::kRule && nullable[el.arg]; });
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    // Edges r -> s: s can start r (everything before it in the alternative is nullable).
    std::vector<std::vector<uint32_t>> edges(n);
    for (size_t r = 0; r < n; ++r)
      for (const auto& alt : rules_[r].alts)
        for (const Elem& el : alt) {
          if (el.kind != ElemKind::kRule) break;
          edges[r].push_back(el.arg);
          if (!nullable[el.arg]) break;
        }
    // Iterative DFS: 0 = new, 1 = on the path, 2 = done.
    std::vector<uint8_t> color(n, 0);
    for (size_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> path = {{static_cast<uint32_t>(start), 0}};
      color[start] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == edges[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t s = edges[r][next++];
        if (color[s] == 1) {
          const RuleDef& d = defs[static_cast<size_t>(rules_[s].owner)];
          return make_error("{}:{}: left recursion in rule '{}'{}", d.line, d.col, d.name,
                            rules_[s].owner == static_cast<int32_t>(s)
                                ? ""
                                : " (a repeated or grouped expression that can be empty)");
        }
        if (color[s] == 0) {
          color[s] = 1;
          path.push_back({s, 0});
        }
      }
    }
    return ok_status();
  }

  // closure(q) for every position (see program.h). Memoized recursion; `done` marks positions.
  Status build_closures(Program& p) {
    const size_t n = p.elems.size();
    std::vector<std::vector<std::vector<uint32_t>>> memo(n);
    std::vector<uint8_t> state(n, 0), pop(n, 0);
    size_t total = 0;
    bool too_big = false;
    std::function<void(uint32_t)> visit = [&](uint32_t q) {
      if (state[q] == 2 || too_big) return;
      EDGELM_CHECK(state[q] == 0, "closure cycle at position ", q);
      state[q] = 1;
      std::vector<std::vector<uint32_t>> reps;
      bool can_pop = false;
      const Elem el = p.elems[q];
      if (el.kind == ElemKind::kChar) {
        reps.push_back({q});
      } else if (el.kind == ElemKind::kEnd) {
        can_pop = true;
      } else {
        const uint32_t next = q + 1;
        const bool tail = p.elems[next].kind == ElemKind::kEnd;
        bool nullable = false;
        for (uint32_t s : p.alt_starts[el.arg]) {
          visit(s);
          if (too_big) return;
          for (const auto& r : memo[s]) {
            std::vector<uint32_t> v;
            v.reserve(r.size() + 1);
            if (!tail) v.push_back(next);
            v.insert(v.end(), r.begin(), r.end());
            reps.push_back(std::move(v));
          }
          nullable = nullable || pop[s];
        }
        if (nullable) {
          visit(next);
          if (too_big) return;
          reps.insert(reps.end(), memo[next].begin(), memo[next].end());
          can_pop = pop[next];
        }
        std::sort(reps.begin(), reps.end());
        reps.erase(std::unique(reps.begin(), reps.end()), reps.end());
      }
      for (const auto& r : reps) total += r.size() + 2;
      if (total > kMaxReps) too_big = true;
      memo[q] = std::move(reps);
      pop[q] = can_pop;
      state[q] = 2;
    };
    p.closure_begin.assign(n + 1, 0);
    p.can_pop.assign(n, 0);
    for (uint32_t q = 0; q < n && !too_big; ++q) visit(q);
    if (too_big)
      return make_error("1:1: grammar too large or too ambiguous (its expansion exceeds {} entries)", kMaxReps);
    for (uint32_t q = 0; q < n; ++q) {
      p.closure_begin[q] = static_cast<uint32_t>(p.reps.size());
      p.can_pop[q] = pop[q];
      for (const auto& r : memo[q]) {
        p.reps.push_back({static_cast<uint32_t>(p.rep_data.size()), static_cast<uint32_t>(r.size())});
        p.rep_data.insert(p.rep_data.end(), r.begin(), r.end());
      }
    }
    p.closure_begin[n] = static_cast<uint32_t>(p.reps.size());
    return ok_status();
  }

  std::vector<RuleBuild> rules_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<CharClass> classes_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> class_ids_;
  int32_t owner_ = 0;
};

}  // namespace
}  // namespace detail

Grammar::Grammar(std::unique_ptr<detail::Program> program) : program_(std::move(program)) {}
Grammar::~Grammar() = default;
int32_t Grammar::n_rules() const { return static_cast<int32_t>(program_->rule_names.size()); }
int32_t Grammar::n_positions() const { return static_cast<int32_t>(program_->elems.size()); }
const std::string& Grammar::rule_name(int32_t id) const { return program_->rule_names[static_cast<size_t>(id)]; }

Result<GrammarPtr> parse_gbnf(std::string_view text, std::string_view root) {
  EDGELM_TRY(std::vector<detail::RuleDef> defs, detail::parse_gbnf_ast(text));
  detail::Compiler compiler;
  EDGELM_TRY(std::unique_ptr<detail::Program> program, compiler.compile(defs, root));
  return GrammarPtr(std::make_shared<const Grammar>(std::move(program)));
}

}  // namespace edgelm::grammar
