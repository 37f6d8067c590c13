#include "model/cuda/cuda_replay.h"

#include <cuda_runtime.h>

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/wire_codec.h"
#include "model/cuda/cuda_exec.cuh"
#include "model/cuda/cuda_util.h"
#include "model/cuda/replay_impl.h"

namespace asgd {
namespace {

using cuda::DeviceBuffer;

// A device buffer that grows to the largest size asked for.
template <typename T>
absl::Status Fit(DeviceBuffer<T>* buffer, int64_t count) {
  if (buffer->size() >= count) return absl::OkStatus();
  ASGD_ASSIGN_OR_RETURN(*buffer, DeviceBuffer<T>::Create(count));
  return absl::OkStatus();
}

template <typename T>
absl::Status UploadTable(const std::vector<T>& host, DeviceBuffer<T>* device,
                         cudaStream_t stream, int64_t* bytes) {
  ASGD_RETURN_IF_ERROR(Fit(device, static_cast<int64_t>(host.size())));
  if (host.empty()) return absl::OkStatus();
  const size_t n = host.size() * sizeof(T);
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device->get(), host.data(), n,
                                            cudaMemcpyHostToDevice, stream));
  *bytes += static_cast<int64_t>(n);
  return absl::OkStatus();
}

class CudaExactCopy final : public DeviceExactCopy {
 public:
  CudaExactCopy(int device, cuda::Stream stream)
      : device_(device), stream_(std::move(stream)) {}

  absl::Status Init(int64_t count) {
    ASGD_RETURN_IF_ERROR(Fit(&flag_, 1));
    ASGD_ASSIGN_OR_RETURN(w_, DeviceBuffer<float>::Create(count));
    count_ = count;
    if (count > 0) {
      // On the copy's own stream, waited for: a cudaMemset would run on the
      // legacy default stream, which the copy's non-blocking stream does not
      // wait for, so it could land after (over) the first Upload.
      ASGD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          w_.get(), 0, static_cast<size_t>(count) * sizeof(float),
          stream_.get()));
      ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    }
    return absl::OkStatus();
  }

  int64_t size() const override { return count_; }
  float* device_data() override { return w_.get(); }

  absl::Status Upload(absl::Span<const float> host,
                      absl::Span<const uint8_t> keep) override {
    ASGD_RETURN_IF_ERROR(CheckSize(host.size()));
    if (!keep.empty() && static_cast<int64_t>(keep.size()) != count_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a pruning mask of ", keep.size(), " flags for a device copy of ",
          count_));
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    masked_ = false;
    std::vector<uint8_t> bits;  // lives until Copy() has waited for it
    if (!keep.empty()) {  // one bit a weight, as replay_impl.h reads it
      bits.resize(PruneMaskBytes(count_));
      PackPruneMask(keep.data(), count_, reinterpret_cast<char*>(bits.data()));
      int64_t ignored = 0;
      ASGD_RETURN_IF_ERROR(
          UploadTable(bits, &keep_bits_, stream_.get(), &ignored));
      masked_ = true;
    }
    // Copy() waits for the stream: the mask is there too.
    return Copy(w_.get(), host.data(), cudaMemcpyHostToDevice);
  }

  absl::Status CopyToDevice(float* dst) const override {
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    return Copy(dst, w_.get(), cudaMemcpyDeviceToDevice);
  }

  absl::Status Download(absl::Span<float> host) const override {
    ASGD_RETURN_IF_ERROR(CheckSize(host.size()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    return Copy(host.data(), w_.get(), cudaMemcpyDeviceToHost);
  }

  absl::Status Replay(const ReplayPlan& plan, float lr, float wd) override {
    if (plan.count != count_) {
      return absl::InvalidArgumentError(
          absl::StrCat("device replay of an update of ", plan.count,
                       " elements on a copy of ", count_));
    }
    float* const device_w = w_.get();
    if (!(lr > 0.0f && std::isfinite(lr)) ||
        !(wd >= 0.0f && std::isfinite(wd))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device replay with learning rate ", lr, " and weight decay ", wd));
    }
    if (plan.num_groups() < 0) {
      return absl::InvalidArgumentError("device replay of an unbuilt plan");
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    cudaStream_t s = stream_.get();
    last_upload_bytes_ = 0;
    int64_t* const up = &last_upload_bytes_;
    ASGD_RETURN_IF_ERROR(UploadTable(plan.group_start, &group_start_, s, up));
    ASGD_RETURN_IF_ERROR(UploadTable(plan.levels, &levels_, s, up));
    ASGD_RETURN_IF_ERROR(UploadTable(plan.bit_origin, &bit_origin_, s, up));
    ASGD_RETURN_IF_ERROR(UploadTable(plan.bits, &bits_, s, up));
    ASGD_RETURN_IF_ERROR(UploadTable(plan.indices, &indices_, s, up));
    ASGD_RETURN_IF_ERROR(UploadTable(plan.values, &values_, s, up));
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flag_.get(), 0, sizeof(int), s));
    cuda_ops::ReplayTables t;
    t.count = plan.count;
    t.num_groups = plan.num_groups();
    t.group_start = group_start_.get();
    t.levels = levels_.get();
    t.bit_origin = bit_origin_.get();
    t.bits = bits_.get();
    t.k = static_cast<int64_t>(plan.indices.size());
    t.indices = indices_.get();
    t.values = values_.get();
    t.keep_bits = masked_ ? keep_bits_.get() : nullptr;
    cuda::Context ctx;
    ctx.stream = s;
    cuda::CudaExec x(ctx);
    if (plan.all_top_k && wd == 0.0f) {
      ASGD_RETURN_IF_ERROR(
          cuda_ops::ReplaySparse(x, t, device_w, lr, flag_.get()));
    } else {
      ASGD_RETURN_IF_ERROR(
          cuda_ops::ReplayDense(x, t, device_w, lr, wd, flag_.get()));
    }
    int bad = 0;
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bad, flag_.get(), sizeof(int),
                                              cudaMemcpyDeviceToHost, s));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    if (bad != 0) {
      return absl::DataLossError(
          "a delta pull update made the device copy non-finite (or larger "
          "than any server keeps)");
    }
    return absl::OkStatus();
  }

  int64_t last_upload_bytes() const override { return last_upload_bytes_; }

 private:
  absl::Status CheckSize(size_t n) const {
    if (static_cast<int64_t>(n) == count_) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(n, " host floats for a device copy of ", count_));
  }
  absl::Status Copy(void* to, const void* from, cudaMemcpyKind kind) const {
    if (count_ == 0) return absl::OkStatus();
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(to, from, static_cast<size_t>(count_) * sizeof(float),
                        kind, stream_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  }

  const int device_;  // made current by every call (any thread may call)
  cuda::Stream stream_;
  int64_t count_ = 0;
  DeviceBuffer<float> w_;
  DeviceBuffer<int64_t> group_start_, bit_origin_, indices_;
  DeviceBuffer<float> levels_, values_;
  DeviceBuffer<uint8_t> bits_;
  DeviceBuffer<uint8_t> keep_bits_;  // the mask's bits when masked_
  bool masked_ = false;
  DeviceBuffer<int> flag_;
  int64_t last_upload_bytes_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceExactCopy>> DeviceExactCopy::Create(
    int64_t count) {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a device copy of ", count, " elements"));
  }
  int device = 0;
  ASGD_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  ASGD_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::CreateStream());
  auto copy = std::make_unique<CudaExactCopy>(device, std::move(stream));
  ASGD_RETURN_IF_ERROR(copy->Init(count));
  return copy;
}

}  // namespace asgd
