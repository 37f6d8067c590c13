#include "model/cuda/host_replay_copy.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/wire_codec.h"
#include "model/cuda/replay_impl.h"

#if defined(__FAST_MATH__)
#error "the exact replay must not be built with -ffast-math"
#endif

namespace asgd {
namespace {

// The Exec replay_impl.h needs: element order, on the calling thread.
struct LoopExec {
  template <class Op>
  absl::Status ForEach(int64_t count, const Op& op) {
    for (int64_t e = 0; e < count; ++e) op(e);
    return absl::OkStatus();
  }
};

class HostReplayCopy final : public ExactCopy {
 public:
  explicit HostReplayCopy(int64_t count) : w_(count, 0.0f) {}

  int64_t size() const override { return static_cast<int64_t>(w_.size()); }

  absl::Status Upload(absl::Span<const float> host,
                      absl::Span<const uint8_t> keep) override {
    ASGD_RETURN_IF_ERROR(CheckSize(host.size()));
    if (!keep.empty() && keep.size() != w_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a pruning mask of ", keep.size(),
                       " flags for a copy of ", w_.size()));
    }
    if (!host.empty()) std::memcpy(w_.data(), host.data(), host.size() * 4);
    keep_bits_.resize(keep.empty() ? 0 : PruneMaskBytes(size()));
    if (!keep.empty()) {
      PackPruneMask(keep.data(), size(),
                    reinterpret_cast<char*>(keep_bits_.data()));
    }
    return absl::OkStatus();
  }

  absl::Status Download(absl::Span<float> host) const override {
    ASGD_RETURN_IF_ERROR(CheckSize(host.size()));
    if (!host.empty()) std::memcpy(host.data(), w_.data(), host.size() * 4);
    return absl::OkStatus();
  }

  absl::Status Replay(const ReplayPlan& plan, float lr, float wd) override {
    if (plan.count != size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("replay of an update of ", plan.count,
                       " elements on a copy of ", size()));
    }
    if (!(lr > 0.0f && std::isfinite(lr)) ||
        !(wd >= 0.0f && std::isfinite(wd))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replay with learning rate ", lr, " and weight decay ", wd));
    }
    if (plan.num_groups() < 0) {
      return absl::InvalidArgumentError("replay of an unbuilt plan");
    }
    const cuda_ops::ReplayTables t = cuda_ops::TablesOf(
        plan, keep_bits_.empty() ? nullptr : keep_bits_.data());
    LoopExec x;
    int bad = 0;
    if (plan.all_top_k && wd == 0.0f) {
      ASGD_RETURN_IF_ERROR(cuda_ops::ReplaySparse(x, t, w_.data(), lr, &bad));
    } else {
      ASGD_RETURN_IF_ERROR(
          cuda_ops::ReplayDense(x, t, w_.data(), lr, wd, &bad));
    }
    last_upload_bytes_ = plan.bytes();
    if (bad != 0) {
      return absl::DataLossError(
          "a delta pull update made the copy non-finite (or larger than any "
          "server keeps)");
    }
    return absl::OkStatus();
  }

  int64_t last_upload_bytes() const override { return last_upload_bytes_; }

 private:
  absl::Status CheckSize(size_t n) const {
    if (n == w_.size()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(n, " host floats for a copy of ", w_.size()));
  }

  std::vector<float> w_;
  std::vector<uint8_t> keep_bits_;  // empty: dense
  int64_t last_upload_bytes_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ExactCopy>> CreateHostReplayCopy(int64_t count) {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a copy of ", count, " elements"));
  }
  return std::make_unique<HostReplayCopy>(count);
}

}  // namespace asgd
