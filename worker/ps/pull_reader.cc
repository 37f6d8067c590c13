#include "worker/ps/pull_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace asgd {

PullReader::PullReader(const ModelLayout* layout, FlatRange range,
                       int64_t max_chunk_elements, absl::Span<float> staging,
                       DeltaCopy* copy, std::optional<uint64_t> held,
                       PartRunner* runner)
    : range_(range),
      runner_(runner),
      staging_(staging),
      copy_(copy),
      assembler_(layout, range, max_chunk_elements, staging.data(),
                 /*check_finite=*/true) {
  if (copy_ != nullptr && copy_->device != nullptr) {
    // Weights land in staging on their way to the device copy.
    receiver_.emplace(layout, range, max_chunk_elements,
                      copy_->max_compressed_elements, staging.data(), held,
                      nullptr, copy_->device.get(), &copy_->keep);
  } else if (copy_ != nullptr) {
    copy_->values.resize(range.size());
    receiver_.emplace(layout, range, max_chunk_elements,
                      copy_->max_compressed_elements, copy_->values.data(),
                      held, runner, /*device=*/nullptr, &copy_->keep);
  }
}

absl::Status PullReader::Add(const PullMessage& msg) {
  if (!error_.ok()) return error_;
  error_ = AddChecked(msg);
  if (!error_.ok() && assembler_.error() == ChunkError::kNonFinite) {
    error_ = absl::FailedPreconditionError(absl::StrCat(
        "the model on this server contains NaN or Inf (", error_.message(),
        "): training diverged; restart with a lower --learning_rate"));
  }
  return error_;
}

absl::Status PullReader::AddChecked(const PullMessage& msg) {
  if (done_) return absl::DataLossError("a pull message after its end");
  if (!started_) {
    version_ = msg.model_version;
    exact_ = msg.exact;
    started_ = true;
  }
  if (msg.model_version != version_) {
    return absl::DataLossError("pull chunks carry different versions");
  }
  if (msg.exact != exact_ || (exact_ && !receiver_.has_value())) {
    return absl::DataLossError(
        "a pull reply mixes exact and plain messages, or is exact without "
        "being asked");
  }
  if (exact_ && msg.end_of_pull) {
    done_ = true;
    lineage_ = msg.lineage;
    return receiver_->Finish(version_, msg.num_chunks);
  }
  if (exact_) return receiver_->Add(msg);
  if (msg.end_of_pull) {
    done_ = true;
    if (msg.num_chunks != static_cast<uint64_t>(assembler_.chunks_received())) {
      return absl::DataLossError(absl::StrCat(
          "pull ended after ", assembler_.chunks_received(),
          " chunks but the server says it sent ", msg.num_chunks));
    }
    return absl::OkStatus();
  }
  if (!msg.has_chunk) {
    return absl::DataLossError("pull message without a chunk");
  }
  return assembler_.Add(msg.chunk);
}

absl::StatusOr<uint64_t> PullReader::Finish() {
  if (!error_.ok()) return error_;
  if (!done_) return absl::DataLossError("the pull reply is incomplete");
  if (exact_ && copy_->device != nullptr) {  // the caller takes it from there
    copy_->version = version_;
    copy_->lineage = lineage_;
    return version_;
  }
  if (exact_) {
    copy_->version = version_;
    copy_->lineage = lineage_;
    const int parts = runner_ != nullptr ? runner_->parts() : 1;
    auto copy_part = [&](int part) {
      int64_t begin, end;
      PartRunner::Split(range_.size(), parts, part, &begin, &end);
      std::memcpy(staging_.data() + begin, copy_->values.data() + begin,
                  (end - begin) * sizeof(float));
    };
    if (runner_ != nullptr) {
      runner_->Run(copy_part);
    } else {
      copy_part(0);
    }
    return version_;
  }
  error_ = assembler_.Finish(assembler_.chunks_received());
  if (!error_.ok()) return error_;
  return version_;
}

bool PullReader::received_weights() const {
  return receiver_.has_value() && receiver_->received_weights();
}

int64_t PullReader::update_bytes() const {
  return receiver_.has_value() ? receiver_->update_bytes() : 0;
}

int64_t PullReader::plan_bytes() const {
  return receiver_.has_value() ? receiver_->plan_bytes() : 0;
}

}  // namespace asgd
