#include "worker/pipeline/stage_updaters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/refusal.h"
#include "common/status_macros.h"
#include "worker/consensus/consensus_rules.h"
#include "worker/ps/push_encoder.h"

namespace asgd {

HandOffSgd::HandOffSgd(ParamClient* client, int64_t offset, int64_t count,
                       float learning_rate, int stage)
    : client_(client),
      offset_(offset),
      count_(count),
      learning_rate_(learning_rate),
      stage_(stage) {}

absl::Status HandOffSgd::Apply(absl::Span<const float> grad,
                               absl::Span<float> params) {
  SgdStep(grad, learning_rate_, params);
  return absl::OkStatus();
}

absl::Status HandOffSgd::Finish(absl::Span<const float> params) {
  std::vector<float> model(client_->layout().total_size());
  std::vector<uint64_t> versions;
  ASGD_RETURN_IF_ERROR(client_->Pull(absl::MakeSpan(model), &versions));
  std::copy(params.begin(), params.end(), model.begin() + offset_);
  ASGD_ASSIGN_OR_RETURN(const PushOutcome outcome,
                        client_->Push(model, versions, 1, PushKind::kAssign));
  if (outcome.dropped > 0) {
    return absl::AbortedError(absl::StrCat(
        "stage ", stage_, ": ", outcome.dropped,
        " servers dropped the hand-off of its layers as stale"));
  }
  return absl::OkStatus();
}

ServerSgd::ServerSgd(ParamClient* client, int64_t offset, int64_t count,
                     float learning_rate, int pull_every, int stage,
                     std::vector<uint64_t> versions)
    : client_(client),
      offset_(offset),
      count_(count),
      learning_rate_(learning_rate),
      pull_every_(std::max(1, pull_every)),
      stage_(stage),
      versions_(std::move(versions)),
      change_(client->layout().total_size(), 0.0f),
      pulled_(client->layout().total_size()) {}

absl::Status ServerSgd::Apply(absl::Span<const float> grad,
                              absl::Span<float> params) {
  const PushEncoder* encoder = client_->push_encoder();
  if (encoder == nullptr) {
    return absl::FailedPreconditionError(
        "the parameter client has no push encoder");
  }
  SgdStep(grad, learning_rate_, params);
  for (int64_t i = 0; i < count_; ++i) {
    change_[offset_ + i] = -(learning_rate_ * grad[i]);
  }
  std::vector<ServerPush> parts;
  for (int i = 0; i < client_->layout().num_servers(); ++i) {
    parts.push_back(encoder->EncodeUncompressed(i, change_, PushKind::kAdd));
  }
  const auto replies = client_->PushEncoded(parts, versions_, 1);
  bool all = true;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].ok()) {
      all &= replies[i]->applied;
      continue;
    }
    if (RefusalOf(replies[i].status()) == Refusal::kNone) {
      return absl::Status(
          replies[i].status().code(),
          absl::StrCat("stage ", stage_, ": an update to server ", i,
                       " failed: ", replies[i].status().message()));
    }
    all = false;  // busy: this update stays local until the next pull
  }
  ++(all ? applied_ : dropped_);
  if (++updates_ % pull_every_ == 0) {
    ASGD_RETURN_IF_ERROR(client_->Pull(absl::MakeSpan(pulled_), &versions_));
    std::copy(pulled_.begin() + offset_, pulled_.begin() + offset_ + count_,
              params.begin());
    ++pulls_;
  }
  return absl::OkStatus();
}

}  // namespace asgd
