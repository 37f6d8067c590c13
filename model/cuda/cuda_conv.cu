// The convolutional layer on a CUDA device: conv_impl.h's steps run with
// CudaExec, on device scratch sized by ConvScratchSizesFor.
#include <climits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cuda/conv_impl.h"
#include "model/cuda/cuda_exec.cuh"
#include "model/cuda/cuda_layer.h"

namespace asgd {
namespace cuda {
namespace {

class CudaConv final : public CudaLayer {
 public:
  CudaConv(const cuda_ops::ConvGeometry& g, int block_rows)
      : g_(g), block_rows_(block_rows) {}

  absl::Status Allocate(int max_rows) {
    const cuda_ops::ConvScratchSizes sizes =
        cuda_ops::ConvScratchSizesFor(g_, block_rows_, max_rows);
    ASGD_ASSIGN_OR_RETURN(cols_, DeviceBuffer<float>::Create(sizes.cols));
    ASGD_ASSIGN_OR_RETURN(z_, DeviceBuffer<float>::Create(sizes.z));
    ASGD_ASSIGN_OR_RETURN(argmax_, DeviceBuffer<int32_t>::Create(sizes.argmax));
    return absl::OkStatus();
  }

  FeatureShape in_shape() const override {
    return {g_.channels, g_.time, g_.freq};
  }
  FeatureShape out_shape() const override {
    return {g_.filters, g_.out_time, g_.out_freq};
  }

  absl::Status Forward(const Context& ctx, const float* params, const float* in,
                       int sequences, int steps, float* out) override {
    CudaExec exec(ctx);
    return cuda_ops::ConvForward(exec, g_, Scratch(), params, in,
                                 sequences * steps, out);
  }

  absl::Status Backward(const Context& ctx, const float* params,
                        const float* in, const float* out, float* dout,
                        int sequences, int steps, float* dparams,
                        float* din) override {
    CudaExec exec(ctx);
    return cuda_ops::ConvBackward(exec, g_, Scratch(), params, in, out, dout,
                                  sequences * steps, dparams, din);
  }

 private:
  cuda_ops::ConvScratch Scratch() const {
    cuda_ops::ConvScratch s;
    s.block_rows = block_rows_;
    s.cols = cols_.get();
    s.z = z_.get();
    s.argmax = argmax_.get();
    return s;
  }

  const cuda_ops::ConvGeometry g_;
  const int block_rows_;
  DeviceBuffer<float> cols_;      // [block_rows * positions, patch]
  DeviceBuffer<float> z_;         // [block_rows * positions, filters]; dZ
  DeviceBuffer<int32_t> argmax_;  // [max_rows, out dim]: window maxima
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaConv(
    const FeatureShape& in, const ConvLayerSpec& spec, int max_rows,
    int block_rows) {
  const cuda_ops::ConvGeometry g = cuda_ops::MakeConvGeometry(in, spec);
  if (g.out_time < 1 || g.out_freq < 1 || g.filters < 1 || max_rows < 1 ||
      block_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv layer does not fit its ", in.channels, "x", in.time,
                     "x", in.freq, " input"));
  }
  const int rows = cuda_ops::ConvBlockRows(g, max_rows, block_rows);
  // GEMM sizes are ints: m = rows * positions, and the block's floats.
  const cuda_ops::ConvScratchSizes sizes =
      cuda_ops::ConvScratchSizesFor(g, rows, max_rows);
  if (sizes.cols > INT_MAX || sizes.z > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv block of ", rows, " rows needs ", sizes.cols,
                     " floats of scratch, more than a GEMM can address"));
  }
  auto layer = std::make_unique<CudaConv>(g, rows);
  ASGD_RETURN_IF_ERROR(layer->Allocate(max_rows));
  return std::unique_ptr<CudaLayer>(std::move(layer));
}

}  // namespace cuda
}  // namespace asgd
