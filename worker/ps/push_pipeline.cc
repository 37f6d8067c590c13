#include "worker/ps/push_pipeline.h"

#include <chrono>
#include <utility>

namespace asgd {

PushPipeline::PushPipeline(int64_t size, const PushPipelineOptions& options,
                           PushFn push)
    : options_(options),
      push_(std::move(push)),
      sum_(size, 0.0f),
      outgoing_(size) {}

PushPipeline::PushPipeline(const PushPipelineOptions& options, TakeFn take,
                           PushFn push)
    : options_(options), take_(std::move(take)), push_(std::move(push)) {}

PushPipeline::~PushPipeline() {
  if (in_flight_.has_value() && in_flight_->valid()) in_flight_->wait();
}

void PushPipeline::Add(absl::Span<const float> grad,
                       const std::vector<uint64_t>& versions) {
  if (pending_ == 0) sum_versions_ = versions;  // oldest model in the sum
  for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += grad[i];
  ++pending_;
}

void PushPipeline::Count(const std::vector<uint64_t>& versions) {
  if (pending_ == 0) sum_versions_ = versions;
  ++pending_;
}

bool PushPipeline::Landed() const {
  return in_flight_.has_value() &&
         in_flight_->wait_for(std::chrono::seconds(0)) ==
             std::future_status::ready;
}

bool PushPipeline::Due() const {
  if (pending_ < options_.push_every) return false;
  const bool busy = in_flight_.has_value() && !Landed();
  return !(busy && options_.background && pending_ < options_.max_minibatches);
}

absl::Status PushPipeline::Start() {
  const int n = pending_;
  pending_ = 0;
  if (take_) {
    if (absl::Status s = take_(n); !s.ok()) return s;
  } else {
    const float inv = 1.0f / n;
    for (size_t i = 0; i < sum_.size(); ++i) {
      outgoing_[i] = sum_[i] * inv;
      sum_[i] = 0.0f;
    }
  }
  auto push = [this, base = sum_versions_, n] {
    return push_(outgoing_, base, n);
  };
  if (options_.background) {
    in_flight_ = std::async(std::launch::async, std::move(push));
    return absl::OkStatus();
  }
  std::promise<absl::StatusOr<PushOutcome>> done;
  done.set_value(push());
  in_flight_ = done.get_future();
  return absl::OkStatus();
}

std::optional<absl::StatusOr<PushOutcome>> PushPipeline::Collect() {
  if (!in_flight_.has_value()) return std::nullopt;
  absl::StatusOr<PushOutcome> outcome = in_flight_->get();
  in_flight_.reset();
  return outcome;
}

}  // namespace asgd
