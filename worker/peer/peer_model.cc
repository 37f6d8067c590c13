#include "worker/peer/peer_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace asgd {
namespace {

// Sizes come from the caller's own buffers: a mismatch is a bug.
void CheckSize(size_t got, int64_t want) {
  if (static_cast<int64_t>(got) != want) std::abort();
}

}  // namespace

PeerModel::PeerModel(std::vector<float> initial)
    : size_(static_cast<int64_t>(initial.size())), x_(std::move(initial)) {}

void PeerModel::Read(absl::Span<float> out) const {
  CheckSize(out.size(), size_);
  absl::MutexLock lock(&mu_);
  std::copy(x_.begin(), x_.end(), out.begin());
}

void PeerModel::Assign(absl::Span<const float> values) {
  CheckSize(values.size(), size_);
  absl::MutexLock lock(&mu_);
  std::copy(values.begin(), values.end(), x_.begin());
}

void PeerModel::ApplyGradient(absl::Span<const float> g, float lr,
                              float scale) {
  CheckSize(g.size(), size_);
  absl::MutexLock lock(&mu_);
  for (int64_t i = 0; i < size_; ++i) x_[i] -= lr * (scale * g[i]);
}

double PeerModel::AverageAsResponder(absl::Span<const float> theirs,
                                     absl::Span<float> before) {
  CheckSize(theirs.size(), size_);
  CheckSize(before.size(), size_);
  double sum = 0;
  absl::MutexLock lock(&mu_);
  for (int64_t i = 0; i < size_; ++i) {
    const float mine = x_[i];
    before[i] = mine;
    const double d = static_cast<double>(theirs[i]) - mine;
    sum += d * d;
    x_[i] = (theirs[i] + mine) * 0.5f;
  }
  return std::sqrt(sum);
}

void PeerModel::AverageAsInitiator(absl::Span<const float> sent,
                                   absl::Span<const float> theirs) {
  CheckSize(sent.size(), size_);
  CheckSize(theirs.size(), size_);
  absl::MutexLock lock(&mu_);
  for (int64_t i = 0; i < size_; ++i) {
    const float average = (sent[i] + theirs[i]) * 0.5f;
    const float changed = x_[i] - sent[i];
    // Adding a zero difference could flip the sign of a zero average.
    x_[i] = changed == 0.0f ? average : average + changed;
  }
}

double L2Distance(absl::Span<const float> a, absl::Span<const float> b) {
  double sum = 0;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

}  // namespace asgd
