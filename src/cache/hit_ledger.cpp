#include "cache/hit_ledger.h"

namespace edgelm::cache {

void HitLedger::add(const std::string& id, HitRecord r) {
  if (capacity_ == 0) return;
  auto [it, fresh] = map_.insert_or_assign(id, std::move(r));
  if (!fresh) return;
  order_.push_back(id);
  while (map_.size() > capacity_) {
    map_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<HitRecord> HitLedger::find(const std::string& id, const std::string& ns) const {
  auto it = map_.find(id);
  if (it == map_.end() || it->second.ns != ns) return std::nullopt;
  return it->second;
}

void HitLedger::clear() {
  map_.clear();
  order_.clear();
}

}  // namespace edgelm::cache
