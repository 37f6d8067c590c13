// ResidentModel: the device side of the CUDA backend's resident model
// (model/backend.h LoadModel .. ReadResidual): the model copy, the gradient
// sum, the 1-bit residual and the encode buffers, all in device memory, and
// the pinned buffers the model arrives through and the encoded bytes leave
// by. The backend computes a minibatch's gradient from model() into its own
// gradient buffer and hands it to Accumulate; everything here runs on the
// stream it is given (the backend's compute stream, so it is ordered after
// the backward pass) and returns when its results are on the host.
//
// Internal to the plugin (nvcc only: includes cuda_util.h).
//
// Thread-safety: as the backend (one thread at a time).
#ifndef ASGD_MODEL_CUDA_CUDA_RESIDENT_MODEL_H_
#define ASGD_MODEL_CUDA_CUDA_RESIDENT_MODEL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compression/one_bit_plan.h"
#include "compression/top_k_plan.h"
#include "model/cuda/cuda_resident.h"
#include "model/cuda/cuda_util.h"

namespace asgd {
namespace cuda {

class ResidentModel {
 public:
  // Device buffers for a model of `num_params`, zeroed (the residual starts
  // at zero). ResourceExhausted when device or pinned memory runs out.
  static absl::StatusOr<std::unique_ptr<ResidentModel>> Create(
      int64_t num_params, cudaStream_t stream);

  // Uploads `params` (num_params floats): straight from a span Pin()ned
  // before, else through pinned memory in pieces, the copy of one
  // overlapping the host's memcpy of the next.
  absl::Status Load(absl::Span<const float> params);
  // The model becomes the device memory `params` (num_params floats, on
  // this device), copied device to device; returns when it is done.
  absl::Status LoadFromDevice(const float* params);

  // Page-locks host memory (cudaHostRegister) that Load will read again and
  // again, until Unpin or the end of this object.
  absl::Status Pin(absl::Span<const float> buffer);
  void Unpin(absl::Span<const float> buffer);
  ~ResidentModel();
  bool loaded() const { return loaded_; }
  const float* model() const { return model_.get(); }

  // Adds the device gradient `grad` (num_params) to the sum unless it has a
  // NaN or Inf; returns whether it was finite. Waits for the stream.
  absl::StatusOr<bool> Accumulate(const float* grad);
  int accumulated() const { return accumulated_; }

  // As ModelBackend::TakeAverage / TakeBf16 / TakeOneBit / TakeTopK /
  // RestoreResidual / ReadResidual; `scratch` is a device buffer of
  // num_params floats that the call may overwrite (the backend's gradient
  // buffer).
  absl::Status TakeAverage(float* scratch, absl::Span<float> out);
  absl::Status TakeBf16(float* scratch, absl::Span<uint16_t> out);
  absl::Status TakeOneBit(const OneBitPlan& plan, float* scratch,
                          absl::Span<char> out);
  absl::Status TakeTopK(const TopKPlan& plan, float* scratch,
                        std::vector<std::string>* out);
  absl::Status RestoreResidual(int64_t flat_begin,
                               absl::Span<const float> values, float* scratch);
  absl::Status ReadResidual(absl::Span<float> out);

 private:
  ResidentModel(int64_t num_params, cudaStream_t stream)
      : num_params_(num_params), stream_(stream) {}
  // Device-side tables of `plan` (kept while the plan stays the same).
  absl::Status PreparePlan(const OneBitPlan& plan);
  absl::Status PrepareTopKPlan(const TopKPlan& plan);
  // Downloads `bytes` of device `src` into host `dst` via pinned memory,
  // then waits.
  absl::Status Download(const void* src, int64_t bytes, void* dst);
  absl::Status ClearSum();

  const int64_t num_params_;
  const cudaStream_t stream_;
  std::vector<const float*> pinned_;  // each num_params floats
  bool loaded_ = false;
  int accumulated_ = 0;
  DeviceBuffer<float> model_, sum_, residual_;
  DeviceBuffer<int> flag_;
  // Two pinned pieces of kPieceFloats, alternating, each with its event.
  PinnedHostBuffer<float> staging_;
  Event piece_done_[2];
  PinnedHostBuffer<int> host_flag_;

  // The plan of the last TakeOneBit and its device tables.
  OneBitPlan plan_;
  int64_t max_chunk_count_ = 0;
  DeviceBuffer<cuda_kernels::OneBitGroupJob> groups_;
  DeviceBuffer<cuda_kernels::OneBitChunkJob> chunks_;
  DeviceBuffer<char> bytes_;
  PinnedHostBuffer<char> host_bytes_;

  // The plan of the last TakeTopK, its device tables (top_k_ points into
  // them) and the pinned entries its bytes are written from.
  TopKPlan top_k_plan_;
  bool top_k_ready_ = false;
  cuda_kernels::TopKTables top_k_;
  DeviceBuffer<cuda_ops::TopKChunkJob> top_k_jobs_;
  DeviceBuffer<cuda_ops::TopKChunkState> top_k_state_;
  DeviceBuffer<uint32_t> top_k_hist_, top_k_indices_;
  DeviceBuffer<int64_t> top_k_greater_, top_k_equal_;
  DeviceBuffer<float> top_k_values_;
  PinnedHostBuffer<uint32_t> host_indices_;
  PinnedHostBuffer<float> host_values_;
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_RESIDENT_MODEL_H_
