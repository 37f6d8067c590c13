#include "model/cuda/cuda_batch_stager.h"

#include <cstring>
#include <optional>
#include <utility>

#include "common/status_macros.h"

namespace asgd {
namespace cuda {

absl::StatusOr<BatchStager> BatchStager::Create(int64_t max_rows,
                                                int64_t input_dim,
                                                int64_t max_labels) {
  BatchStager stager;
  ASGD_ASSIGN_OR_RETURN(stager.stream_, CreateStream());
  for (Buffers& slot : stager.slots_) {
    ASGD_ASSIGN_OR_RETURN(
        slot.h_inputs, PinnedHostBuffer<float>::Create(max_rows * input_dim));
    ASGD_ASSIGN_OR_RETURN(slot.h_labels,
                          PinnedHostBuffer<int32_t>::Create(max_labels));
    ASGD_ASSIGN_OR_RETURN(slot.d_inputs,
                          DeviceBuffer<float>::Create(max_rows * input_dim));
    ASGD_ASSIGN_OR_RETURN(slot.d_labels,
                          DeviceBuffer<int32_t>::Create(max_labels));
    ASGD_ASSIGN_OR_RETURN(slot.uploaded, CreateEvent());
  }
  return stager;
}

absl::Status BatchStager::Upload(const Batch& batch, int slot,
                                 bool with_labels) {
  Buffers& b = slots_[slot];
  const size_t input_bytes = batch.inputs.size() * sizeof(float);
  std::memcpy(b.h_inputs.get(), batch.inputs.data(), input_bytes);
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.d_inputs.get(), b.h_inputs.get(),
                                            input_bytes, cudaMemcpyHostToDevice,
                                            stream_.get()));
  if (with_labels) {
    const size_t label_bytes = batch.labels.size() * sizeof(int32_t);
    std::memcpy(b.h_labels.get(), batch.labels.data(), label_bytes);
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(b.d_labels.get(), b.h_labels.get(), label_bytes,
                        cudaMemcpyHostToDevice, stream_.get()));
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.uploaded.get(), stream_.get()));
  return absl::OkStatus();
}

absl::StatusOr<BatchStager::Slot> BatchStager::Acquire(const Batch& batch,
                                                       bool with_labels,
                                                       cudaStream_t compute) {
  const BatchStaging::Use use = staging_.Begin(batch);
  if (use.upload) ASGD_RETURN_IF_ERROR(Upload(batch, use.slot, with_labels));
  const Buffers& b = slots_[use.slot];
  // A staged batch's upload may still be on its way too.
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, b.uploaded.get(), 0));
  return Slot{b.d_inputs.get(), b.d_labels.get()};
}

absl::Status BatchStager::StageAnnounced() {
  int slot = -1;
  std::optional<Batch> next = staging_.TakeAnnounced(&slot);
  if (!next.has_value()) return absl::OkStatus();
  const Buffers& b = slots_[slot];
  if (next->inputs.size() > static_cast<size_t>(b.d_inputs.size()) ||
      next->labels.size() > static_cast<size_t>(b.d_labels.size())) {
    staging_.Reset();  // not staged: its call uploads (and refuses) it
    return absl::OkStatus();
  }
  return Upload(*next, slot, /*with_labels=*/true);
}

absl::Status BatchStager::Finish() {
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  return absl::OkStatus();
}

void BatchStager::Drain() {
  if (stream_) cudaStreamSynchronize(stream_.get());
  staging_.Reset();
}

}  // namespace cuda
}  // namespace asgd
