#include "server/push_assembler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/refusal.h"

namespace asgd {

PushAssembler::PushAssembler(const ParamStore* store) : store_(store) {}

absl::Status PushAssembler::Reject(RejectReason reason, absl::Status status) {
  rejected_ = true;
  reason_ = reason;
  staging_.reset();
  return status;
}

absl::Status PushAssembler::Add(const PushMessage& msg) {
  if (rejected_) {
    return absl::InvalidArgumentError(
        "push message after the push was rejected");
  }
  if (committed_) {
    return absl::InvalidArgumentError("push message after its commit");
  }
  if (have_header_ && msg.model_version != base_version_) {
    return Reject(RejectReason::kBadHeader,
                  absl::InvalidArgumentError(absl::StrCat(
                      "message carries version ", msg.model_version,
                      " but the push header said ", base_version_)));
  }
  switch (msg.part) {
    case PushMessage::Part::kHeader: {
      if (have_header_) {
        return Reject(RejectReason::kBadHeader,
                      absl::InvalidArgumentError("second push header"));
      }
      const auto& h = msg.header;
      const uint32_t max_minibatches =
          static_cast<uint32_t>(store_->options().max_push_minibatches);
      if (h.num_minibatches() < 1 || h.num_minibatches() > max_minibatches) {
        return Reject(RejectReason::kBadHeader,
                      absl::InvalidArgumentError(absl::StrCat(
                          "push header needs 1 <= num_minibatches <= ",
                          max_minibatches, ", got ", h.num_minibatches())));
      }
      if (h.kind() != asgd::v1::PushHeader::GRADIENT &&
          h.kind() != asgd::v1::PushHeader::ASSIGN) {
        return Reject(RejectReason::kBadHeader,
                      absl::InvalidArgumentError(absl::StrCat(
                          "unknown push kind ", static_cast<int>(h.kind()),
                          " (want GRADIENT or ASSIGN)")));
      }
      have_header_ = true;
      base_version_ = h.model_version();
      num_minibatches_ = static_cast<int>(h.num_minibatches());
      worker_id_ = h.worker_id();
      assign_ = h.kind() == asgd::v1::PushHeader::ASSIGN;
      return absl::OkStatus();
    }
    case PushMessage::Part::kChunk: {
      if (!have_header_) {
        return Reject(
            RejectReason::kBadSequence,
            absl::InvalidArgumentError("push chunk before the push header"));
      }
      for (absl::string_view piece : msg.chunk.data) {
        chunk_bytes_ += static_cast<int64_t>(piece.size());
      }
      if (!chunks_.has_value()) {
        // Memory only now that data arrives, and only within the budget.
        staging_ = store_->AcquireStaging();
        if (staging_ == nullptr) {
          return Reject(
              RejectReason::kPushMemory,
              WithRefusal(absl::UnavailableError(
                              "server busy: the memory for pushes in flight "
                              "is in use; retry or compute another minibatch"),
                          Refusal::kPushMemory));
        }
        chunks_.emplace(&store_->layout(), store_->range(),
                        store_->options().max_chunk_elements, staging_->data(),
                        /*check_finite=*/true);
      }
      absl::Status s = chunks_->Add(msg.chunk);
      if (!s.ok()) return Reject(FromChunkError(chunks_->error()), s);
      return absl::OkStatus();
    }
    case PushMessage::Part::kCommit: {
      if (!have_header_) {
        return Reject(
            RejectReason::kBadSequence,
            absl::InvalidArgumentError("push commit before the push header"));
      }
      if (!chunks_.has_value()) {
        // Only a range of no elements can be complete without a chunk.
        if (store_->range().size() > 0 || msg.commit_chunks != 0) {
          return Reject(RejectReason::kBadSequence,
                        absl::InvalidArgumentError(absl::StrCat(
                            "commit declares ", msg.commit_chunks,
                            " chunks but none arrived (incomplete: stopped "
                            "before the first chunk)")));
        }
        staging_ = std::make_shared<std::vector<float>>();
      } else {
        absl::Status s = chunks_->Finish(msg.commit_chunks);
        if (!s.ok()) return Reject(FromChunkError(chunks_->error()), s);
      }
      committed_ = true;
      return absl::OkStatus();
    }
    case PushMessage::Part::kNone:
      break;
  }
  return Reject(RejectReason::kBadHeader,
                absl::InvalidArgumentError("empty push message"));
}

absl::Status PushAssembler::EndOfStream() {
  if (rejected_ || committed_) return absl::OkStatus();
  return Reject(
      RejectReason::kIncomplete,
      absl::InvalidArgumentError(
          "push stream ended before its commit; nothing was applied"));
}

void PushAssembler::Abandon() {
  if (committed_) return;
  rejected_ = true;
  staging_.reset();
}

PushRequest PushAssembler::TakeRequest() {
  PushRequest request;
  request.worker_id = worker_id_;
  request.base_version = base_version_;
  request.num_minibatches = num_minibatches_;
  request.assign = assign_;
  if (committed_) {
    request.values = std::move(staging_);
    request.max_abs = chunks_.has_value() ? chunks_->max_abs() : 0.0f;
  }
  staging_.reset();
  return request;
}

}  // namespace asgd
