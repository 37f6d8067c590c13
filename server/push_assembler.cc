#include "server/push_assembler.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {
// More minibatches than any worker accumulates; keeps the count an int.
constexpr uint32_t kMaxMinibatchesPerPush = 1 << 20;
}  // namespace

PushAssembler::PushAssembler(const ParamStore* store)
    : staging_(store->AcquireStaging()),
      chunks_(&store->layout(), store->range(),
              store->options().max_chunk_elements, staging_->data(),
              /*check_finite=*/true) {}

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
      if (h.num_minibatches() < 1 ||
          h.num_minibatches() > kMaxMinibatchesPerPush) {
        return Reject(
            RejectReason::kBadHeader,
            absl::InvalidArgumentError(absl::StrCat(
                "push header needs 1 <= num_minibatches <= ",
                kMaxMinibatchesPerPush, ", got ", h.num_minibatches())));
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
      absl::Status s = chunks_.Add(msg.chunk);
      if (!s.ok()) return Reject(FromChunkError(chunks_.error()), s);
      return absl::OkStatus();
    }
    case PushMessage::Part::kCommit: {
      if (!have_header_) {
        return Reject(
            RejectReason::kBadSequence,
            absl::InvalidArgumentError("push commit before the push header"));
      }
      absl::Status s = chunks_.Finish(msg.commit_chunks);
      if (!s.ok()) return Reject(FromChunkError(chunks_.error()), s);
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

PushRequest PushAssembler::TakeRequest() {
  PushRequest request;
  request.worker_id = worker_id_;
  request.base_version = base_version_;
  request.num_minibatches = num_minibatches_;
  request.assign = assign_;
  if (committed_) request.values = std::move(staging_);
  staging_.reset();
  return request;
}

}  // namespace asgd
