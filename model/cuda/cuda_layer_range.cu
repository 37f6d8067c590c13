#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "model/cuda/cuda_layer.h"
#include "model/cuda/cuda_layer_range.h"
#include "model/cuda/cuda_util.h"
#include "model/softmax_loss.h"

namespace asgd {
namespace {

using cuda::CudaLayer;
using cuda::DeviceBuffer;

class CudaLayerRange final : public LayerRange {
 public:
  CudaLayerRange(const ModelSpec& spec, int first, int last, int max_rows,
                 const CudaOptions& options)
      : LayerRange(spec, first, last),
        options_(options),
        max_rows_(max_rows),
        loss_(spec) {}

  ~CudaLayerRange() override {
    if (stream_ && cudaSetDevice(options_.device) == cudaSuccess) Drain();
  }

  // Allocates everything; called once by CreateCudaLayerRange.
  absl::Status Init(const ModelSpec& spec) {
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_ASSIGN_OR_RETURN(stream_, cuda::CreateStream());
    ASGD_ASSIGN_OR_RETURN(cublas_,
                          cuda::CreateCublas(stream_.get(), options_.math));
    ctx_.stream = stream_.get();
    ctx_.cublas = cublas_.get();
    ctx_.math = options_.math;

    int64_t widest = in_dim();
    for (int i = first(); i < last(); ++i) {
      ASGD_ASSIGN_OR_RETURN(std::unique_ptr<CudaLayer> layer,
                            cuda::CreateCudaLayer(spec, i, max_rows_,
                                                  options_));
      offsets_.push_back(LayerParamOffset(spec, i) - param_offset());
      const int64_t dim = layer->out_shape().dim();
      ASGD_ASSIGN_OR_RETURN(
          DeviceBuffer<float> acts,
          DeviceBuffer<float>::Create(int64_t{max_rows_} * dim));
      acts_.push_back(std::move(acts));
      widest = std::max(widest, dim);
      layers_.push_back(std::move(layer));
    }
    const int64_t rows = max_rows_;
    ASGD_ASSIGN_OR_RETURN(d_params_,
                          DeviceBuffer<float>::Create(param_count()));
    ASGD_ASSIGN_OR_RETURN(d_grad_, DeviceBuffer<float>::Create(param_count()));
    ASGD_ASSIGN_OR_RETURN(d_in_, DeviceBuffer<float>::Create(rows * in_dim()));
    ASGD_ASSIGN_OR_RETURN(d_delta_, DeviceBuffer<float>::Create(rows * widest));
    ASGD_ASSIGN_OR_RETURN(d_delta_prev_,
                          DeviceBuffer<float>::Create(rows * widest));
    out_.resize(rows * out_dim());
    loss_delta_.resize(out_.size());
    return absl::OkStatus();
  }

  absl::Status Forward(const float* params, const float* in, int sequences,
                       int steps) override {
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return Checked(RunForward(params, in, sequences, steps));
  }

  const float* out() const override { return out_.data(); }

  BatchResult Loss(const Batch& batch) override {
    return loss_.Compute(batch, out_.data(), loss_delta_.data());
  }

  absl::Status Backward(const float* params, const float* in,
                        const float* dout, int sequences, int steps,
                        float* dparams, float* din) override {
    (void)params;  // the weights and input Forward uploaded (the contract)
    (void)in;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return Checked(RunBackward(dout != nullptr ? dout : loss_delta_.data(),
                               sequences, steps, dparams, din));
  }

 private:
  absl::Status RunForward(const float* params, const float* in, int sequences,
                          int steps) {
    const int64_t rows = int64_t{sequences} * steps;
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        d_params_.get(), params, param_count() * sizeof(float),
        cudaMemcpyHostToDevice, stream_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        d_in_.get(), in, rows * in_dim() * sizeof(float),
        cudaMemcpyHostToDevice, stream_.get()));
    for (size_t l = 0; l < layers_.size(); ++l) {
      const float* x = l == 0 ? d_in_.get() : acts_[l - 1].get();
      ASGD_RETURN_IF_ERROR(layers_[l]->Forward(ctx_,
                                               d_params_.get() + offsets_[l],
                                               x, sequences, steps,
                                               acts_[l].get()));
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        out_.data(), acts_.back().get(), rows * out_dim() * sizeof(float),
        cudaMemcpyDeviceToHost, stream_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  }

  absl::Status RunBackward(const float* dout, int sequences, int steps,
                           float* dparams, float* din) {
    const int64_t rows = int64_t{sequences} * steps;
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        d_delta_.get(), dout, rows * out_dim() * sizeof(float),
        cudaMemcpyHostToDevice, stream_.get()));
    for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
      const float* x = l == 0 ? d_in_.get() : acts_[l - 1].get();
      float* dx = l == 0 && din == nullptr ? nullptr : d_delta_prev_.get();
      // Backward may overwrite d_delta_ (the activation's derivative is
      // folded into it); it is this range's scratch.
      ASGD_RETURN_IF_ERROR(layers_[l]->Backward(
          ctx_, d_params_.get() + offsets_[l], x, acts_[l].get(),
          d_delta_.get(), sequences, steps, d_grad_.get() + offsets_[l], dx));
      std::swap(d_delta_, d_delta_prev_);
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        dparams, d_grad_.get(), param_count() * sizeof(float),
        cudaMemcpyDeviceToHost, stream_.get()));
    if (din != nullptr) {  // the first layer's input gradient, swapped in
      ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          din, d_delta_.get(), rows * in_dim() * sizeof(float),
          cudaMemcpyDeviceToHost, stream_.get()));
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  }

  // After an error nothing queued may still write the caller's memory.
  absl::Status Checked(absl::Status status) {
    if (!status.ok()) Drain();
    return status;
  }
  void Drain() {
    cudaStreamSynchronize(stream_.get());
    cudaGetLastError();
  }

  const CudaOptions options_;
  const int max_rows_;
  SoftmaxLoss loss_;
  cuda::Stream stream_;
  cuda::Cublas cublas_;
  cuda::Context ctx_;
  std::vector<std::unique_ptr<CudaLayer>> layers_;
  std::vector<int64_t> offsets_;  // of each layer, within the range
  std::vector<DeviceBuffer<float>> acts_;  // per layer [max_rows, out]
  DeviceBuffer<float> d_params_, d_grad_, d_in_, d_delta_, d_delta_prev_;
  std::vector<float> out_;         // the last Forward's output rows
  std::vector<float> loss_delta_;  // Loss's gradient of the logits
};

}  // namespace

absl::StatusOr<std::unique_ptr<LayerRange>> CreateCudaLayerRange(
    const ModelSpec& spec, int first, int last, int max_rows,
    const CudaOptions& options) {
  ASGD_RETURN_IF_ERROR(CheckLayerRange(spec, first, last, max_rows));
  ASGD_RETURN_IF_ERROR(cuda::CheckCudaOptions(options));
  auto range = std::make_unique<CudaLayerRange>(spec, first, last, max_rows,
                                                options);
  ASGD_RETURN_IF_ERROR(range->Init(spec));
  return std::unique_ptr<LayerRange>(std::move(range));
}

}  // namespace asgd
