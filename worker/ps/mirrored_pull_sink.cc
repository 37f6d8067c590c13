#include "worker/ps/mirrored_pull_sink.h"

#include "common/status_macros.h"

namespace asgd {

absl::Status MirroredPullSink::Commit(FlatRange range) {
  absl::MutexLock lock(&mu_);
  mirrored_.erase(range.begin);
  pending_.erase(range.begin);  // the buffer holds the range's values
  return absl::OkStatus();
}

absl::Status MirroredPullSink::CommitCopy(FlatRange range,
                                          const ExactCopy& copy) {
  {
    absl::MutexLock lock(&mu_);
    mirrored_.erase(range.begin);  // until the mirror holds it
    pending_.erase(range.begin);
  }
  if (copy.size() != range.size()) {
    return absl::InvalidArgumentError(
        "an exact copy of another size than its range");
  }
  absl::Status s = backend_->MirrorFromCopy(buffer_, range.begin, copy);
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  mirrored_[range.begin] = range.size();
  pending_[range.begin] = range.size();
  return absl::OkStatus();
}

absl::Status MirroredPullSink::Download() {
  absl::MutexLock lock(&mu_);
  while (!pending_.empty()) {
    const auto [begin, count] = *pending_.begin();
    ASGD_RETURN_IF_ERROR(backend_->DownloadMirror(buffer_, begin, count));
    pending_.erase(pending_.begin());
  }
  return absl::OkStatus();
}

int64_t MirroredPullSink::pending() const {
  absl::MutexLock lock(&mu_);
  int64_t floats = 0;
  for (const auto& [begin, count] : pending_) floats += count;
  return floats;
}

bool MirroredPullSink::mirrored() const {
  absl::MutexLock lock(&mu_);
  int64_t covered = 0;
  int64_t end = 0;
  for (const auto& [begin, count] : mirrored_) {
    if (begin < end) return false;  // overlapping ranges: not a tiling
    covered += count;
    end = begin + count;
  }
  return covered == static_cast<int64_t>(buffer_.size());
}

PullSink* MirroredBuffers::For(absl::Span<float> buffer) {
  absl::MutexLock lock(&mu_);
  for (const auto& sink : sinks_) {
    if (sink->data() == buffer.data() &&
        sink->size() == static_cast<int64_t>(buffer.size())) {
      return sink.get();
    }
  }
  if (sinks_.size() >= kMaxBuffers) return nullptr;
  sinks_.push_back(std::make_unique<MirroredPullSink>(backend_, buffer));
  return sinks_.back().get();
}

bool MirroredBuffers::Mirrored(absl::Span<const float> buffer) const {
  absl::MutexLock lock(&mu_);
  for (const auto& sink : sinks_) {
    if (sink->data() == buffer.data() &&
        sink->size() == static_cast<int64_t>(buffer.size())) {
      return sink->mirrored();
    }
  }
  return false;
}

absl::Status MirroredBuffers::Download(absl::Span<const float> buffer) {
  MirroredPullSink* found = nullptr;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& sink : sinks_) {
      if (sink->data() == buffer.data() &&
          sink->size() == static_cast<int64_t>(buffer.size())) {
        found = sink.get();
        break;
      }
    }
  }
  // The sink outlives this call (sinks_ only grows), and downloading takes
  // its own lock, not the list's.
  return found != nullptr ? found->Download() : absl::OkStatus();
}

absl::Status PullInto(ParamClient* client, MirroredBuffers* mirrors,
                      absl::Span<float> buffer,
                      std::vector<uint64_t>* versions) {
  PullSink* sink = mirrors != nullptr ? mirrors->For(buffer) : nullptr;
  if (sink == nullptr) return client->Pull(buffer, versions);
  return client->Pull(sink, versions);
}

}  // namespace asgd
