#include "engine/draft_sampling.h"

#include "engine/scheduler.h"
#include "sample/sampler.h"

namespace edgelm::engine {

void append_draft_token(Sequence& s, sample::Sampler& smp, std::span<float> row, std::vector<int32_t>& hist,
                        std::vector<float>& probs) {
  hist.assign(s.tokens.begin(), s.tokens.end());
  hist.insert(hist.end(), s.draft.begin(), s.draft.end());
  if (smp.is_greedy(s.n_prompt)) {
    s.draft.push_back(smp.sample(row, hist, s.n_prompt));  // proposed with certainty
    return;
  }
  smp.distribution(row, hist, s.n_prompt, probs);
  s.draft.push_back(smp.draw(probs));
  s.draft_probs.insert(s.draft_probs.end(), probs.begin(), probs.end());
}

}  // namespace edgelm::engine
