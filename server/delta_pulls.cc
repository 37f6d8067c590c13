#include "server/delta_pulls.h"

#include <limits>
#include <utility>

#include "absl/random/random.h"

namespace asgd {

DeltaPulls::DeltaPulls(ParamStore* store, int64_t max_base_bytes)
    : max_base_bytes_(max_base_bytes),
      lineage_(absl::Uniform<uint64_t>(absl::BitGen(), 1,
                                       std::numeric_limits<uint64_t>::max())),
      shared_(std::make_shared<Shared>()),
      base_bytes_(std::make_shared<std::atomic<int64_t>>(0)) {
  shared_->store = store;
  shared_->max_update_bytes =
      store->range().size() * int64_t{sizeof(float)} / 2;
}

std::optional<DeltaPlan> DeltaPulls::PlanOn(
    const Shared& shared, std::shared_ptr<const StoreSnapshot> base) {
  const uint64_t version = shared.store->version();
  auto updates = shared.store->update_log()->Collect(
      base->version, version, shared.max_update_bytes);
  if (!updates.has_value()) return std::nullopt;
  return DeltaPlan{std::move(base), std::move(*updates), version};
}

DeltaPulls::Answer DeltaPulls::Plan(bool has_copy, uint64_t held,
                                    uint64_t lineage, bool replays_mask,
                                    DeltaPlan* plan) {
  const ParamStore& store = *shared_->store;
  if (store.keep() != nullptr && !replays_mask) return Answer::kWeights;
  const UpdateLog& log = *store.update_log();
  if (has_copy && lineage == lineage_) {
    const uint64_t version = store.version();
    auto updates = log.Collect(held, version, shared_->max_update_bytes);
    if (updates.has_value()) {
      *plan = DeltaPlan{nullptr, std::move(*updates), version};
      return Answer::kPlan;
    }
  }
  std::shared_ptr<const StoreSnapshot> base;
  {
    absl::MutexLock lock(&shared_->mu);
    base = shared_->base;
  }
  if (base != nullptr) {
    if (std::optional<DeltaPlan> on_base = PlanOn(*shared_, std::move(base))) {
      *plan = std::move(*on_base);
      return Answer::kPlan;
    }
  }
  // A new base is worth taking only if the updates after it can be
  // replayed: the newest one admitted is (or there is none yet).
  const uint64_t accepted = store.accepted();
  return accepted == 0 || log.last_unreplayable() < accepted
             ? Answer::kNeedBase
             : Answer::kWeights;
}

void DeltaPulls::RequestBase(
    std::function<void(std::optional<DeltaPlan>)> ready) {
  Shared& shared = *shared_;
  const int64_t bytes = shared.store->range().size() * int64_t{sizeof(float)};
  bool take = false;
  {
    absl::MutexLock lock(&shared.mu);
    if (shared.taking) {
      shared.waiting.push_back(std::move(ready));
      return;
    }
    // The current base is dropped for the new one; its memory comes back
    // once no pull sends it any more.
    const int64_t current =
        shared.base != nullptr && shared.base.use_count() == 1 ? bytes : 0;
    if (base_bytes_->load() - current + bytes <= max_base_bytes_) {
      take = true;
      shared.taking = true;
      shared.base = nullptr;
      base_bytes_->fetch_add(bytes);  // given back by the deleter
      shared.waiting.push_back(std::move(ready));
    }
  }
  if (!take) {  // no memory left for bases: weights
    ready(std::nullopt);
    return;
  }
  shared.store->TakeSnapshotAsync(
      [shared = shared_, counter = base_bytes_,
       bytes](absl::StatusOr<StoreSnapshot> snapshot) {
        std::shared_ptr<const StoreSnapshot> base;
        if (snapshot.ok()) {
          base = std::shared_ptr<const StoreSnapshot>(
              new StoreSnapshot(std::move(*snapshot)),
              [counter, bytes](const StoreSnapshot* p) {
                delete p;
                counter->fetch_sub(bytes);
              });
        } else {
          counter->fetch_sub(bytes);
        }
        std::vector<std::function<void(std::optional<DeltaPlan>)>> waiting;
        {
          absl::MutexLock lock(&shared->mu);
          shared->base = base;
          shared->taking = false;
          waiting.swap(shared->waiting);
        }
        for (auto& ready : waiting) {
          ready(base != nullptr ? PlanOn(*shared, base) : std::nullopt);
        }
      });
}

}  // namespace asgd
