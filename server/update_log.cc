#include "server/update_log.h"

#include <utility>

namespace asgd {

std::shared_ptr<const LoggedUpdate> LoggedUpdate::Of(
    uint64_t version, const CompressedGradient& gradient, float learning_rate,
    float weight_decay) {
  if (gradient.encoded_sizes.size() != gradient.chunks.size() ||
      gradient.chunks.empty()) {
    return Unreplayable(version);
  }
  auto u = std::make_shared<LoggedUpdate>();
  u->version = version;
  u->replayable = true;
  u->learning_rate = learning_rate;
  u->weight_decay = weight_decay;
  u->encoding = gradient.encoding == GradEncoding::kOneBit
                    ? PushEncoding::kOneBit
                    : PushEncoding::kTopK;
  u->bytes.assign(gradient.encoded.data(), gradient.encoded.size());
  u->chunks.reserve(gradient.chunks.size());
  int64_t byte_begin = 0, offset = 0;
  for (size_t i = 0; i < gradient.chunks.size(); ++i) {
    const int64_t size = gradient.encoded_sizes[i];
    const int64_t count = gradient.chunks[i].count;
    u->chunks.push_back({byte_begin, size, offset, count});
    byte_begin += size;
    offset += count;
  }
  if (byte_begin != static_cast<int64_t>(u->bytes.size())) {
    return Unreplayable(version);
  }
  return u;
}

std::shared_ptr<const LoggedUpdate> LoggedUpdate::Unreplayable(
    uint64_t version) {
  auto u = std::make_shared<LoggedUpdate>();
  u->version = version;
  return u;
}

void UpdateLog::Append(std::shared_ptr<const LoggedUpdate> update) {
  absl::MutexLock lock(&mu_);
  if (!entries_.empty() && update->version != entries_.back()->version + 1) {
    while (!entries_.empty()) DropOldestLocked();
  }
  if (!update->replayable) last_unreplayable_ = update->version;
  bytes_ += static_cast<int64_t>(update->bytes.size());
  entries_.push_back(std::move(update));
  while (!entries_.empty() &&
         (bytes_ > max_bytes_ || entries_.size() > kMaxEntries)) {
    DropOldestLocked();
  }
}

void UpdateLog::DropOldestLocked() {
  bytes_ -= static_cast<int64_t>(entries_.front()->bytes.size());
  entries_.pop_front();
}

std::optional<std::vector<std::shared_ptr<const LoggedUpdate>>>
UpdateLog::Collect(uint64_t from, uint64_t to, int64_t max_bytes) const {
  if (from > to) return std::nullopt;
  std::vector<std::shared_ptr<const LoggedUpdate>> out;
  if (from == to) return out;
  absl::MutexLock lock(&mu_);
  if (entries_.empty()) return std::nullopt;
  const uint64_t first = entries_.front()->version;
  const uint64_t last = entries_.back()->version;
  if (from + 1 < first || to > last) return std::nullopt;
  out.reserve(to - from);
  int64_t bytes = 0;
  for (uint64_t v = from + 1; v <= to; ++v) {
    const std::shared_ptr<const LoggedUpdate>& u = entries_[v - first];
    if (!u->replayable) return std::nullopt;
    bytes += static_cast<int64_t>(u->bytes.size());
    if (bytes > max_bytes) return std::nullopt;
    out.push_back(u);
  }
  return out;
}

uint64_t UpdateLog::last_unreplayable() const {
  absl::MutexLock lock(&mu_);
  return last_unreplayable_;
}

int64_t UpdateLog::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t UpdateLog::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace asgd
