#include "worker/ps/delta_receiver.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"
#include "step/replay_plan.h"

namespace asgd {
namespace {

absl::Status NonFiniteCopy() {
  return absl::DataLossError(
      "a delta pull update made the copy non-finite (or larger than any "
      "server keeps)");
}

// The server's step context for a copy under `keep` (null: dense).
UpdateContext Under(const uint8_t* keep) {
  UpdateContext ctx;
  ctx.keep = keep;
  return ctx;
}

}  // namespace

DeltaReceiver::DeltaReceiver(const ModelLayout* layout, FlatRange range,
                             int64_t max_chunk_elements,
                             int64_t max_compressed_elements, float* copy,
                             std::optional<uint64_t> held, PartRunner* runner,
                             ExactCopy* device, std::vector<uint8_t>* keep)
    : layout_(layout),
      range_(range),
      max_chunk_elements_(max_chunk_elements),
      max_compressed_elements_(max_compressed_elements),
      copy_(copy),
      runner_(device == nullptr && runner != nullptr && runner->parts() > 1
                  ? runner
                  : nullptr),
      device_(device),
      keep_(keep),
      at_(held) {}

absl::Status DeltaReceiver::Add(const PullMessage& msg) {
  if (!msg.exact) {
    return absl::DataLossError(
        "a delta pull's reply mixes exact and plain messages");
  }
  if (msg.has_update && msg.has_chunk) {
    return absl::DataLossError("a pull message with an update and a chunk");
  }
  if (!msg.has_update && !msg.has_chunk) {
    return absl::DataLossError("a pull message without a chunk or an update");
  }
  const bool in_update = update_chunks_left_ > 0;
  if (msg.has_chunk && !in_update) {
    // Weights (or their mask), before any update.
    if (weights_done_ || updates_ > 0) {
      return absl::DataLossError(
          "weights in a delta pull's reply after its updates");
    }
    ++chunks_;
    if (msg.chunk.dtype == kPruneMaskWireDtype) return AddMaskChunk(msg.chunk);
    return AddWeightChunk(msg.chunk);
  }
  last_weights_.reset();
  if (msg.has_chunk) {
    ++chunks_;
    return AddUpdateChunk(msg.chunk);
  }
  // An update's header.
  if (msg.update.version() == 0) {
    return absl::DataLossError("a delta pull update numbered 0");
  }
  if (in_update) {
    return absl::DataLossError(absl::StrCat(
        "update header after ", next_offset_, " of ", range_.size(),
        " elements of the previous update"));
  }
  if (weights_.has_value() && !weights_done_) {
    ASGD_RETURN_IF_ERROR(FinishWeights());
    at_ = msg.update.version() - 1;  // the weights' version
  }
  if (!at_.has_value()) {
    return absl::DataLossError(
        "a delta pull sent updates for a copy this worker does not hold");
  }
  if (msg.update.version() != *at_ + 1) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update ", msg.update.version(), " after version ", *at_));
  }
  const float lr = msg.update.learning_rate();
  const float wd = msg.update.weight_decay();
  if (!(lr > 0.0f && std::isfinite(lr)) || !(wd >= 0.0f && std::isfinite(wd))) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update ", msg.update.version(), " has learning rate ", lr,
        " and weight decay ", wd));
  }
  const uint64_t most_chunks = static_cast<uint64_t>(range_.size());
  if (msg.update.num_chunks() > most_chunks) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update with ", msg.update.num_chunks(), " chunks for ",
        range_.size(), " elements"));
  }
  // The server's step: Optimizer::Apply with this learning rate (constant
  // schedule, scale 1: the rate already includes both).
  OptimizerOptions options;
  options.learning_rate = lr;
  options.weight_decay = wd;
  absl::StatusOr<Optimizer> step = Optimizer::Create(options);
  if (!step.ok()) return absl::DataLossError(step.status().message());
  step_.emplace(*step);
  lr_ = lr;
  wd_ = wd;
  update_chunks_left_ = msg.update.num_chunks();
  next_offset_ = 0;
  if (update_chunks_left_ == 0) {  // an update that changed nothing
    at_ = msg.update.version();
    ++updates_;
  } else {
    at_.reset();  // until its last chunk
    at_version_pending_ = msg.update.version();
  }
  return absl::OkStatus();
}

absl::string_view DeltaReceiver::Joined(const TensorChunkView& chunk) {
  if (chunk.data.size() == 1) return chunk.data[0];
  scratch_.clear();
  for (absl::string_view piece : chunk.data) {
    scratch_.append(piece.data(), piece.size());
  }
  return scratch_;
}

absl::Status DeltaReceiver::AddWeightChunk(const TensorChunkView& chunk) {
  last_weights_.reset();
  if (!weights_.has_value()) {
    weights_.emplace(layout_, range_, max_chunk_elements_, copy_,
                     /*check_finite=*/true);
    at_.reset();  // the copy is being replaced
    masks_ = 0;
  }
  absl::Status s = weights_->Add(chunk);
  if (!s.ok()) return absl::DataLossError(s.message());
  // Accepted: a tensor of the slice, within it.
  int64_t bytes = 0;
  for (absl::string_view piece : chunk.data) bytes += piece.size();
  const int t = layout_->FindTensor(chunk.tensor);
  last_weights_ =
      LastChunk{std::string(chunk.tensor), chunk.offset,
                layout_->tensor_offset(t) + static_cast<int64_t>(chunk.offset) -
                    range_.begin,
                bytes / WireBytes(static_cast<WireDtype>(chunk.dtype))};
  return absl::OkStatus();
}

absl::Status DeltaReceiver::AddMaskChunk(const TensorChunkView& chunk) {
  if (keep_ == nullptr) {
    return absl::DataLossError(
        "a delta pull sent a pruning mask to a copy that cannot replay one");
  }
  if (!last_weights_.has_value() || last_weights_->tensor != chunk.tensor ||
      last_weights_->offset != chunk.offset) {
    return absl::DataLossError(
        "a delta pull's pruning mask does not follow the weight chunk it "
        "belongs to");
  }
  const LastChunk c = *last_weights_;
  last_weights_.reset();
  if (masks_ == 0) keep_->assign(range_.size(), 1);
  uint8_t* keep = keep_->data() + c.local;
  if (!UnpackPruneMask(Joined(chunk), c.count, keep)) {
    return absl::DataLossError(
        absl::StrCat("a delta pull's pruning mask at offset ", c.offset,
                     " is not ", PruneMaskBytes(c.count), " bytes for ",
                     c.count, " elements with the bits past them 0"));
  }
  const float* w = copy_ + c.local;
  for (int64_t i = 0; i < c.count; ++i) {
    if (keep[i] == 0 && w[i] != 0.0f) {
      return absl::DataLossError(absl::StrCat(
          "a delta pull sent a pruned weight that is not 0 (offset ",
          c.offset + i, ")"));
    }
  }
  ++masks_;
  return absl::OkStatus();
}

absl::Status DeltaReceiver::AddUpdateChunk(const TensorChunkView& chunk) {
  if (chunk.dtype != static_cast<int>(PushEncoding::kOneBit) &&
      chunk.dtype != static_cast<int>(PushEncoding::kTopK)) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update chunk of dtype ", chunk.dtype,
        " (want ONE_BIT or TOP_K)"));
  }
  if (!chunk.tensor.empty() ||
      chunk.offset != static_cast<uint64_t>(next_offset_)) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update chunk at offset ", chunk.offset, ", expected ",
        next_offset_, " (and no tensor name)"));
  }
  absl::string_view bytes = Joined(chunk);
  if (keeps_chunks()) {  // kept until the update is complete
    kept_bytes_.emplace_back(bytes.data(), bytes.size());
    bytes = kept_bytes_.back();
  }
  CodecLimits limits;
  limits.max_elements = max_compressed_elements_;
  absl::StatusOr<CompressedChunk> parsed = ParseCompressedChunk(bytes, limits);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update chunk at offset ", chunk.offset, ": ",
        parsed.status().message()));
  }
  if (static_cast<int>(parsed->encoding == GradEncoding::kOneBit
                           ? PushEncoding::kOneBit
                           : PushEncoding::kTopK) != chunk.dtype ||
      parsed->count > range_.size() - next_offset_) {
    return absl::DataLossError(absl::StrCat(
        "delta pull update chunk at offset ", chunk.offset, " holds ",
        parsed->count, " ", GradEncodingName(parsed->encoding),
        " elements; the slice has ", range_.size() - next_offset_, " left"));
  }
  if (keeps_chunks()) {
    kept_.push_back(*parsed);
  } else {
    const ApplyStats stats = ApplyCompressedRange(
        *step_, absl::MakeConstSpan(&*parsed, 1), 0, parsed->count,
        copy_ + next_offset_, nullptr, Under(KeepAt(next_offset_)));
    if (!(stats.max_abs_w <= kMaxMagnitude)) {  // NaN fails too
      return NonFiniteCopy();
    }
  }
  update_bytes_ += static_cast<int64_t>(bytes.size());
  next_offset_ += parsed->count;
  if (--update_chunks_left_ == 0) {
    if (next_offset_ != range_.size()) {
      return absl::DataLossError(absl::StrCat(
          "delta pull update ", at_version_pending_, " covers ", next_offset_,
          " of ", range_.size(), " elements"));
    }
    if (device_ != nullptr) {
      ASGD_RETURN_IF_ERROR(ReplayOnDevice());
    } else if (runner_ != nullptr) {
      ASGD_RETURN_IF_ERROR(ReplayKept());
    }
    at_ = at_version_pending_;
    ++updates_;
  }
  return absl::OkStatus();
}

absl::Status DeltaReceiver::ReplayKept() {
  const int parts = runner_->parts();
  std::vector<float> max_abs_w(parts, 0.0f);
  runner_->Run([&](int part) {
    int64_t begin, end;
    PartRunner::Split(range_.size(), parts, part, &begin, &end);
    if (begin == end) return;
    max_abs_w[part] =
        ApplyCompressedRange(*step_, kept_, begin, end, copy_ + begin, nullptr,
                             Under(KeepAt(begin)))
            .max_abs_w;
  });
  kept_.clear();
  kept_bytes_.clear();
  for (float m : max_abs_w) {
    if (!(m <= kMaxMagnitude)) return NonFiniteCopy();  // NaN fails too
  }
  return absl::OkStatus();
}

absl::Status DeltaReceiver::ReplayOnDevice() {
  ReplayPlanBuilder builder;
  for (const CompressedChunk& chunk : kept_) builder.Add(chunk);
  kept_.clear();
  kept_bytes_.clear();
  const ReplayPlan plan = builder.Take();
  plan_bytes_ += plan.bytes();
  // Non-finite: DataLoss, as on the host; the rate and decay were checked.
  return device_->Replay(plan, lr_, wd_);
}

absl::Status DeltaReceiver::FinishWeights() {
  absl::Status s = weights_->Finish(weights_->chunks_received());
  if (!s.ok()) return absl::DataLossError(s.message());
  last_weights_.reset();
  if (masks_ != 0 && masks_ != weights_->chunks_received()) {
    return absl::DataLossError(absl::StrCat(
        "a delta pull sent the pruning mask of ", masks_, " of its ",
        weights_->chunks_received(), " weight chunks"));
  }
  if (masks_ == 0 && keep_ != nullptr) keep_->clear();  // a dense model
  weights_done_ = true;
  if (device_ == nullptr) return absl::OkStatus();
  absl::Status uploaded =
      device_->Upload(absl::MakeConstSpan(copy_, range_.size()),
                      keep_ != nullptr ? absl::MakeConstSpan(*keep_)
                                       : absl::Span<const uint8_t>());
  // The device copy holds the mask now: no host copy of it stays.
  if (keep_ != nullptr) std::vector<uint8_t>().swap(*keep_);
  return uploaded;
}

absl::Status DeltaReceiver::Finish(uint64_t version, uint64_t num_chunks) {
  if (update_chunks_left_ > 0) {
    return absl::DataLossError("a delta pull ended inside an update");
  }
  if (weights_.has_value() && !weights_done_) {
    ASGD_RETURN_IF_ERROR(FinishWeights());
    at_ = version;  // weights, no updates
  }
  if (num_chunks != static_cast<uint64_t>(chunks_)) {
    return absl::DataLossError(absl::StrCat(
        "delta pull ended after ", chunks_, " chunks but the server says it "
        "sent ", num_chunks));
  }
  if (!at_.has_value() || *at_ != version) {
    return absl::DataLossError(absl::StrCat(
        "a delta pull at version ", version, " left the copy at ",
        at_.has_value() ? absl::StrCat(*at_) : std::string("no version")));
  }
  return absl::OkStatus();
}

}  // namespace asgd
