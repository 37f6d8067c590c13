#include "server/push_assembler.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/refusal.h"
#include "common/text_quote.h"
#include "common/wire_codec.h"

namespace asgd {

PushAssembler::PushAssembler(const ParamStore* store) : store_(store) {}

absl::Status PushAssembler::Reject(RejectReason reason, absl::Status status) {
  rejected_ = true;
  reason_ = reason;
  staging_.reset();
  return status;
}

absl::Status PushAssembler::AcceptHeader(const asgd::v1::PushHeader& h) {
  const uint32_t max_minibatches =
      static_cast<uint32_t>(store_->options().max_push_minibatches);
  if (h.num_minibatches() < 1 || h.num_minibatches() > max_minibatches) {
    return Reject(RejectReason::kBadHeader,
                  absl::InvalidArgumentError(absl::StrCat(
                      "push header needs 1 <= num_minibatches <= ",
                      max_minibatches, ", got ", h.num_minibatches())));
  }
  switch (h.kind()) {
    case asgd::v1::PushHeader::GRADIENT:
      kind_ = PushRequest::Kind::kGradient;
      break;
    case asgd::v1::PushHeader::ASSIGN:
      kind_ = PushRequest::Kind::kAssign;
      break;
    case asgd::v1::PushHeader::ADD:
      kind_ = PushRequest::Kind::kAdd;
      break;
    case asgd::v1::PushHeader::ADMM:
      kind_ = PushRequest::Kind::kAdmm;
      break;
    default:
      return Reject(RejectReason::kBadHeader,
                    absl::InvalidArgumentError(absl::StrCat(
                        "unknown push kind ", static_cast<int>(h.kind()),
                        " (want GRADIENT, ASSIGN, ADD or ADMM)")));
  }
  admm_slot_ = h.admm_slot();
  // Refused before any data arrives.
  if (absl::Status s = store_->CheckPushKind(kind_, admm_slot_); !s.ok()) {
    return Reject(RejectReason::kBadHeader, std::move(s));
  }
  have_header_ = true;
  base_version_ = h.model_version();
  num_minibatches_ = static_cast<int>(h.num_minibatches());
  worker_id_ = h.worker_id();
  return absl::OkStatus();
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
      return AcceptHeader(msg.header);
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
      if (!chunks_.has_value() && !compressed_sequence_.has_value()) {
        if (absl::Status s = StartChunks(msg.chunk); !s.ok()) return s;
      }
      // The bytes this chunk stages, charged before they are written: what
      // the push holds of the budget follows what it has sent.
      if (!store_->ChargeStaging(staging_.get(), StagedBytes(msg.chunk))) {
        return RejectPushMemory();
      }
      if (compressed_sequence_.has_value()) return AddCompressed(msg.chunk);
      if (IsCompressedWireDtype(msg.chunk.dtype)) {
        return Reject(RejectReason::kBadEncoding,
                      absl::InvalidArgumentError(absl::StrCat(
                          "a compressed chunk (dtype ", msg.chunk.dtype,
                          ") in a push whose first chunk was float; one push "
                          "has one encoding")));
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
      if (compressed_sequence_.has_value()) {
        absl::Status s = compressed_sequence_->Finish(msg.commit_chunks);
        if (!s.ok()) {
          return Reject(FromChunkError(compressed_sequence_->error()), s);
        }
      } else if (!chunks_.has_value()) {
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
  request.kind = kind_;
  request.admm_slot = static_cast<int>(admm_slot_);
  if (committed_ && compressed_sequence_.has_value()) {
    auto gradient = std::make_shared<CompressedGradient>();
    gradient->encoding = encoding_ == PushEncoding::kOneBit
                             ? GradEncoding::kOneBit
                             : GradEncoding::kTopK;
    gradient->encoded =
        absl::string_view(reinterpret_cast<const char*>(staging_->data()),
                          compressed_bytes_);
    gradient->storage = std::move(staging_);
    gradient->chunks = std::move(compressed_chunks_);
    gradient->max_abs = compressed_max_abs_;
    gradient->encoded_sizes = std::move(compressed_sizes_);
    request.max_abs = compressed_max_abs_;
    request.compressed = std::move(gradient);
  } else if (committed_) {
    request.values = std::move(staging_);
    request.max_abs = chunks_.has_value() ? chunks_->max_abs() : 0.0f;
  }
  staging_.reset();
  return request;
}

int64_t PushAssembler::chunks_received() const {
  if (compressed_sequence_.has_value()) {
    return compressed_sequence_->chunks_received();
  }
  return chunks_.has_value() ? chunks_->chunks_received() : 0;
}

int64_t PushAssembler::StagedBytes(const TensorChunkView& chunk) const {
  int64_t bytes = 0;
  for (absl::string_view piece : chunk.data) bytes += piece.size();
  if (compressed_sequence_.has_value() || !IsKnownWireDtype(chunk.dtype)) {
    return bytes;  // copied as they are (or refused by the chunk check)
  }
  // Decoded to float32.
  return bytes / WireBytes(static_cast<WireDtype>(chunk.dtype)) *
         int64_t{sizeof(float)};
}

absl::Status PushAssembler::RejectPushMemory() {
  return Reject(RejectReason::kPushMemory,
                WithRefusal(absl::UnavailableError(
                                "server busy: the memory for pushes in flight "
                                "is in use; retry or compute another minibatch"),
                            Refusal::kPushMemory));
}

absl::Status PushAssembler::StartChunks(const TensorChunkView& chunk) {
  const bool compressed = IsCompressedWireDtype(chunk.dtype);
  if (compressed && !store_->options().compressed_pushes) {
    return Reject(RejectReason::kBadEncoding,
                  absl::InvalidArgumentError(absl::StrCat(
                      "this server does not accept compressed pushes (dtype ",
                      chunk.dtype, "); push float32 or bfloat16")));
  }
  if (compressed && kind_ != PushRequest::Kind::kGradient) {
    return Reject(RejectReason::kBadHeader,
                  absl::InvalidArgumentError(
                      kind_ == PushRequest::Kind::kAssign
                          ? "an ASSIGN push carries weights, not a compressed "
                            "gradient"
                          : "an ADD or ADMM push carries float32 or bfloat16 "
                            "values, not a compressed gradient"));
  }
  // Memory only now that data arrives, and only within the budget; the
  // chunk's bytes are charged by Add().
  staging_ = store_->AcquireStaging(0);
  if (staging_ == nullptr) return RejectPushMemory();
  if (compressed) {
    encoding_ = static_cast<PushEncoding>(chunk.dtype);
    compressed_sequence_.emplace(&store_->layout(), store_->range(),
                                 store_->options().max_compressed_chunk_elements);
  } else {
    if (IsKnownWireDtype(chunk.dtype)) {
      encoding_ = static_cast<PushEncoding>(chunk.dtype);
    }
    chunks_.emplace(&store_->layout(), store_->range(),
                    store_->options().max_chunk_elements, staging_->data(),
                    /*check_finite=*/true);
  }
  return absl::OkStatus();
}

absl::Status PushAssembler::AddCompressed(const TensorChunkView& chunk) {
  ChunkSequence& sequence = *compressed_sequence_;
  int t;
  if (absl::Status s = sequence.Tensor(chunk.tensor, &t); !s.ok()) {
    return Reject(FromChunkError(sequence.error()), s);
  }
  if (chunk.dtype != static_cast<int>(encoding_)) {
    return Reject(RejectReason::kBadEncoding,
                  absl::InvalidArgumentError(absl::StrCat(
                      "chunk of '", EscapeForMessage(chunk.tensor),
                      "' is encoded as dtype ", chunk.dtype,
                      " in a push of ", PushEncodingName(encoding_),
                      " chunks; one push has one encoding")));
  }
  int64_t bytes = 0;
  for (absl::string_view piece : chunk.data) bytes += piece.size();
  const int64_t capacity =
      static_cast<int64_t>(staging_->size() * sizeof(float));
  if (bytes > capacity - compressed_bytes_) {
    return Reject(RejectReason::kBadSize,
                  absl::InvalidArgumentError(absl::StrCat(
                      "compressed push exceeds ", capacity,
                      " bytes, the size of its float32 form, at the chunk of '",
                      EscapeForMessage(chunk.tensor), "' at offset ",
                      chunk.offset)));
  }
  char* at = reinterpret_cast<char*>(staging_->data()) + compressed_bytes_;
  int64_t copied = 0;
  for (absl::string_view piece : chunk.data) {
    if (piece.empty()) continue;
    std::memcpy(at + copied, piece.data(), piece.size());
    copied += piece.size();
  }
  CodecLimits limits;
  limits.max_elements = sequence.max_elements();
  absl::StatusOr<CompressedChunk> parsed =
      ParseCompressedChunk(absl::string_view(at, bytes), limits);
  if (!parsed.ok()) {
    return Reject(RejectReason::kBadEncoding,
                  absl::InvalidArgumentError(absl::StrCat(
                      "chunk of '", EscapeForMessage(chunk.tensor),
                      "' at offset ", chunk.offset, ": ",
                      parsed.status().message())));
  }
  const GradEncoding want = encoding_ == PushEncoding::kOneBit
                                ? GradEncoding::kOneBit
                                : GradEncoding::kTopK;
  if (parsed->encoding != want) {
    return Reject(RejectReason::kBadEncoding,
                  absl::InvalidArgumentError(absl::StrCat(
                      "chunk of '", EscapeForMessage(chunk.tensor),
                      "' at offset ", chunk.offset, " holds ",
                      GradEncodingName(parsed->encoding),
                      " data but says dtype ", chunk.dtype)));
  }
  absl::StatusOr<int64_t> placed =
      sequence.Place(t, chunk.tensor, chunk.offset, parsed->count);
  if (!placed.ok()) {
    return Reject(FromChunkError(sequence.error()), placed.status());
  }
  compressed_bytes_ += bytes;
  compressed_sizes_.push_back(bytes);
  compressed_max_abs_ =
      std::max(compressed_max_abs_, CompressedMaxAbs(*parsed));
  compressed_chunks_.push_back(*parsed);
  return absl::OkStatus();
}

}  // namespace asgd
