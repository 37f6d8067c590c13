#include "server/pull_writer.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace asgd {

absl::Status CheckPullDtype(int dtype) {
  if (IsKnownWireDtype(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("pull asks for wire dtype ", dtype,
                   IsCompressedWireDtype(dtype)
                       ? ", a compressed gradient encoding (pushes only)"
                       : ", which is unknown"));
}

absl::Status CheckSlotPull(const ParamStore& store, uint32_t slot, bool delta) {
  if (delta) {
    return absl::InvalidArgumentError(
        "a pull of an ADMM slot cannot be a delta pull");
  }
  if (slot >= static_cast<uint32_t>(store.admm_slots())) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull of ADMM slot ", slot, ": this server keeps ",
                     store.admm_slots(), " (--admm_slots)"));
  }
  return absl::OkStatus();
}

PullWriter::PullWriter(ParamStore* store, ServerMetrics* metrics,
                       uint64_t worker_id, WireDtype dtype, bool end_marker,
                       int admm_slot)
    : store_(store),
      metrics_(metrics),
      dtype_(dtype),
      end_marker_(end_marker),
      chunks_(PlanChunks(store->layout(), store->range(),
                         store->options().max_chunk_elements)),
      version_(store->version()),
      snapshot_(admm_slot < 0 ? store->SnapshotForPull(worker_id) : nullptr),
      admm_slot_(admm_slot) {
  Count(ServerMetrics::PullForm::kWeights);
}

PullWriter::PullWriter(ParamStore* store, ServerMetrics* metrics,
                       DeltaPlan plan, uint64_t lineage)
    : store_(store),
      metrics_(metrics),
      dtype_(WireDtype::kFloat32),
      end_marker_(true),
      chunks_(plan.base != nullptr
                  ? PlanChunks(store->layout(), store->range(),
                               store->options().max_chunk_elements)
                  : std::vector<ChunkRef>()),
      version_(plan.version),
      admm_slot_(-1),
      plan_(std::move(plan)),
      lineage_(lineage) {
  Count(plan_->base != nullptr ? ServerMetrics::PullForm::kExactWeights
                               : ServerMetrics::PullForm::kUpdates);
}

bool PullWriter::Next(PullPart* msg) {
  *msg = PullPart();
  msg->model_version = version_;
  if (mask_next_) {
    NextMask(msg);
    return true;
  }
  if (next_ < chunks_.size()) {
    NextWeights(msg);
    return true;
  }
  if (plan_.has_value() && next_update_ < plan_->updates.size()) {
    NextUpdatePart(msg);
    return true;
  }
  if (!end_marker_) return false;
  end_marker_ = false;
  msg->kind = PullPart::Kind::kEndOfPull;
  msg->num_chunks = sent_chunks_;
  msg->exact = plan_.has_value();
  msg->lineage = plan_.has_value() ? lineage_ : 0;
  return true;
}

void PullWriter::NextWeights(PullPart* msg) {
  const ChunkRef& c = chunks_[next_++];
  ++sent_chunks_;
  const int64_t local = c.flat_begin - store_->range().begin;
  const int64_t count = c.count;
  msg->tensor = store_->layout().tensors()[c.tensor].name;
  msg->offset = c.offset;
  if (plan_.has_value()) {
    const float* from = plan_->base->weights.data() + local;
    msg->kind = PullPart::Kind::kExactChunk;
    msg->dtype_value = static_cast<int>(WireDtype::kFloat32);
    msg->data_bytes = count * int64_t{sizeof(float)};
    msg->fill = [from, count](char* out) {
      std::memcpy(out, from, count * sizeof(float));
    };
    mask_next_ = store_->keep() != nullptr;  // a pruned model's: its mask
  } else {
    msg->kind = PullPart::Kind::kChunk;
    msg->dtype = dtype_;
    msg->count = count;
    msg->fill = [store = store_, snapshot = snapshot_.get(), local, count,
                 dtype = dtype_, slot = admm_slot_](char* out) {
      if (slot >= 0) {
        store->ReadSlotEncoded(slot, local, count, dtype, out);
      } else if (snapshot != nullptr) {
        EncodeFloats(snapshot->data() + local, count, dtype, out);
      } else {
        store->ReadEncoded(local, count, dtype, out);
      }
    };
  }
  if (metrics_ != nullptr) metrics_->OnBytesSent(count * WireBytes(dtype_));
}

void PullWriter::NextMask(PullPart* msg) {
  mask_next_ = false;
  const ChunkRef& c = chunks_[next_ - 1];  // the weights just sent
  ++sent_chunks_;
  const uint8_t* keep = store_->keep() + (c.flat_begin - store_->range().begin);
  const int64_t count = c.count;
  msg->kind = PullPart::Kind::kExactChunk;
  msg->tensor = store_->layout().tensors()[c.tensor].name;
  msg->offset = c.offset;
  msg->dtype_value = kPruneMaskWireDtype;
  msg->data_bytes = PruneMaskBytes(count);
  msg->fill = [keep, count](char* out) { PackPruneMask(keep, count, out); };
  if (metrics_ != nullptr) metrics_->OnBytesSent(msg->data_bytes);
}

void PullWriter::NextUpdatePart(PullPart* msg) {
  const LoggedUpdate& u = *plan_->updates[next_update_];
  if (next_update_chunk_ < 0) {  // the update's header
    msg->kind = PullPart::Kind::kUpdateHeader;
    msg->update_version = u.version;
    msg->learning_rate = u.learning_rate;
    msg->weight_decay = u.weight_decay;
    msg->num_chunks = u.chunks.size();
    next_update_chunk_ = 0;
    return;
  }
  const LoggedUpdate::Chunk& c = u.chunks[next_update_chunk_];
  msg->kind = PullPart::Kind::kExactChunk;
  msg->offset = c.offset;
  msg->dtype_value = static_cast<int>(u.encoding);
  msg->data_bytes = c.byte_size;
  const char* from = u.bytes.data() + c.byte_begin;
  const int64_t size = c.byte_size;
  msg->fill = [from, size](char* out) { std::memcpy(out, from, size); };
  ++sent_chunks_;
  if (metrics_ != nullptr) metrics_->OnBytesSent(c.byte_size);
  if (++next_update_chunk_ == static_cast<int64_t>(u.chunks.size())) {
    ++next_update_;
    next_update_chunk_ = -1;
  }
}

void PullWriter::Count(ServerMetrics::PullForm form) {
  store_->CountPull();
  if (form == ServerMetrics::PullForm::kUpdates) store_->CountUpdatePull();
  if (metrics_ == nullptr) return;
  metrics_->OnPull();
  metrics_->OnPullForm(form);
}

}  // namespace asgd
