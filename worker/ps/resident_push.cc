#include "worker/ps/resident_push.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/status_macros.h"
#include "worker/ps/push_encoder.h"

namespace asgd {

ResidentPush::ResidentPush(ModelBackend* backend, ParamClient* client)
    : backend_(backend), client_(client) {
  const PushEncoder* encoder = client->push_encoder();
  if (encoder == nullptr) return;
  if ((encoder->encoding() == PushEncoding::kOneBit &&
       !encoder->one_bit_plan().chunks.empty()) ||
      (encoder->encoding() == PushEncoding::kTopK &&
       !encoder->top_k_plan().chunks.empty()) ||
      encoder->encoding() == PushEncoding::kBfloat16) {
    encoder_ = encoder;
  }
}

absl::Status ResidentPush::Take(int num_minibatches) {
  (void)num_minibatches;  // the backend counts its own minibatches
  unapplied_.clear();
  if (encoder_ == nullptr) {
    average_.resize(client_->layout().total_size());
    return backend_->TakeAverage(absl::MakeSpan(average_));
  }
  if (encoder_->encoding() == PushEncoding::kBfloat16) {
    bf16_.resize(client_->layout().total_size());
    ASGD_RETURN_IF_ERROR(backend_->TakeBf16(absl::MakeSpan(bf16_)));
    ASGD_ASSIGN_OR_RETURN(parts_, encoder_->SplitBf16(bf16_));
    return absl::OkStatus();
  }
  if (encoder_->encoding() == PushEncoding::kTopK) {
    std::vector<std::string> chunks;
    ASGD_RETURN_IF_ERROR(backend_->TakeTopK(encoder_->top_k_plan(), &chunks));
    ASGD_ASSIGN_OR_RETURN(parts_, encoder_->SplitTopK(std::move(chunks)));
    return absl::OkStatus();
  }
  const OneBitPlan& plan = encoder_->one_bit_plan();
  bytes_.resize(plan.total_bytes);
  ASGD_RETURN_IF_ERROR(backend_->TakeOneBit(plan, absl::MakeSpan(bytes_)));
  ASGD_ASSIGN_OR_RETURN(parts_, encoder_->SplitOneBit(bytes_));
  return absl::OkStatus();
}

absl::StatusOr<PushOutcome> ResidentPush::Send(
    const std::vector<uint64_t>& versions, int num_minibatches) {
  if (encoder_ == nullptr) {
    return client_->Push(average_, versions, num_minibatches,
                         PushKind::kGradient);
  }
  std::vector<absl::StatusOr<ServerPushReply>> replies =
      client_->PushEncoded(parts_, versions, num_minibatches);
  for (size_t s = 0; s < replies.size(); ++s) {
    if (!replies[s].ok() || !replies[s]->applied) {
      unapplied_.push_back(static_cast<int>(s));
    }
  }
  return SumUpPushReplies(replies);
}

absl::Status ResidentPush::Restore() {
  // A bfloat16 push keeps no residual: what a server did not apply is gone,
  // as for a host gradient's float push.
  for (int s : unapplied_) {
    ASGD_RETURN_IF_ERROR(PushEncoder::ForEachDecoded(
        parts_[s], [this](int64_t flat_begin, absl::Span<const float> values) {
          return backend_->RestoreResidual(flat_begin, values);
        }));
  }
  unapplied_.clear();
  return absl::OkStatus();
}

}  // namespace asgd
