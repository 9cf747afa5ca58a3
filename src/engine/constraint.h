// Constrained decoding of one sequence (Request::grammar): which tokens may come next, and when
// the output must end.
//
// Job: hold the sequence's grammar::Matcher, mask a logits row to the tokens that continue a
// sentence of the grammar, and advance the matcher by each generated token. End-of-generation
// tokens are allowed only where the grammar may end; where nothing can follow, the engine ends
// the request at once (must_end). A grammar with a trigger (tool calls under tool_choice "auto")
// is lazy: the output is free until the trigger text appears in it, and from the trigger's first
// byte on everything must be a sentence of the grammar.
//
// Token budget: an output must also end within its request's max_new_tokens (and context). A
// token is taken only if the output can still be completed in the tokens left after it, counting
// one byte per token (every vocabulary here has a token for each single byte); otherwise the
// engine takes the closing token instead: the likeliest of the single-byte tokens (or EOG) that
// keep a completion in reach. So a constrained output that can fit its budget always finishes
// as a complete sentence, whatever the grammar's unbounded parts and the model's taste.
//
// Invariants:
//  - Masking is exact: after mask(), a token keeps its logit iff accept() of it would succeed
//    (EOG tokens: iff can_end()). Samplers then see only those tokens, so every sampler path
//    (greedy, filters, seeded draws, speculative verification) stays inside the grammar.
//  - Single-threaded, like the rest of a sequence's state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace edgelm::engine {

// A model's vocabulary as the grammar sees it: each token's output bytes (empty for control and
// end-of-generation tokens, which a grammar never takes) and the end-of-generation ids.
struct GrammarVocab {
  grammar::TokenIndexPtr index;
  std::vector<int32_t> eog;          // sorted
  std::vector<int32_t> byte_tokens;  // the tokens whose piece is one byte
  bool is_eog(int32_t id) const;
};

class Constraint {
 public:
  // gated: the grammar waits for open() (a thinking model's answer after its reasoning span);
  // otherwise it starts at `trigger` (empty: at once).
  Constraint(grammar::GrammarPtr g, std::shared_ptr<const GrammarVocab> vocab, std::string trigger, bool gated = false);

  // Whether the grammar applies to the next token (no trigger, or the trigger was seen).
  bool active() const { return active_; }
  // The grammar was violated (a lazy grammar whose trigger was followed by text it rejects):
  // the constraint no longer applies and the output is plain text.
  bool broken() const { return broken_; }
  // Active, and the output is a complete sentence after which nothing can follow.
  bool must_end() const { return active_ && !broken_ && matcher_.must_end(); }

  // Whether `token` may come next (true for any token while inactive or broken).
  bool allows(int32_t token) const;
  // Sets the logits of the tokens that may not come next to -inf. Returns the number of tokens
  // left (0: nothing can continue the output; the caller ends it with an error). A no-op
  // returning n_vocab while inactive or broken. `mask` is scratch [n_vocab].
  int32_t mask(std::span<float> logits, std::vector<uint8_t>& mask) const;
  // Whether, after `token`, the output can still be complete within `left_after` more tokens
  // (EOG: whether it can end now). True while inactive or broken.
  bool fits(int32_t token, int64_t left_after) const;
  // The closing token (see above) from a logits row; -1 when none keeps a completion in reach.
  int32_t closing_token(std::span<const float> logits, int64_t left_after) const;
  // Active and the output so far is a complete sentence.
  bool can_end() const { return active_ && !broken_ && matcher_.can_end(); }

  // Advances by a generated (non-EOG) token. Returns false when an active grammar rejects it
  // (then broken()).
  bool accept(int32_t token);

  // A gated grammar starts now, with `text` (the answer's first bytes, possibly empty) as its
  // first input; false when it rejects them (then broken()).
  bool open(std::string_view text);

  // A copy for checking drafts (speculative.h) without touching this one.
  Constraint fork() const { return *this; }

 private:
  // A lazy grammar's output before its trigger: looks for the trigger, starts the grammar there.
  bool feed_inactive(std::string_view bytes);

  grammar::Matcher matcher_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::string trigger_;
  std::string pending_;  // while inactive: the output's tail that may still start the trigger
  bool active_ = true;
  bool broken_ = false;
  bool gated_ = false;  // waiting for open()
};

}  // namespace edgelm::engine
