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
  CudaConv(const cuda_ops::ConvGeometry& g, int block_rows, int dw_slice)
      : g_(g), block_rows_(block_rows), dw_slice_(dw_slice) {}

  absl::Status Allocate(int max_rows) {
    const cuda_ops::ConvScratchSizes sizes =
        cuda_ops::ConvScratchSizesFor(g_, block_rows_, max_rows, dw_slice_);
    ASGD_ASSIGN_OR_RETURN(cols_, DeviceBuffer<float>::Create(sizes.cols));
    ASGD_ASSIGN_OR_RETURN(z_, DeviceBuffer<float>::Create(sizes.z));
    ASGD_ASSIGN_OR_RETURN(argmax_, DeviceBuffer<int32_t>::Create(sizes.argmax));
    if (sizes.dw_parts > 0) {
      ASGD_ASSIGN_OR_RETURN(dw_parts_,
                            DeviceBuffer<float>::Create(sizes.dw_parts));
    }
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
    s.dw_slice = dw_slice_;
    s.cols = cols_.get();
    s.z = z_.get();
    s.argmax = argmax_.get();
    s.dw_parts = dw_parts_.get();
    return s;
  }

  const cuda_ops::ConvGeometry g_;
  const int block_rows_;
  const int dw_slice_;
  DeviceBuffer<float> cols_;      // [block_rows * positions, patch]; dP^T
  DeviceBuffer<float> z_;         // [filters, block_rows * positions]; dZ
  DeviceBuffer<int32_t> argmax_;  // [max_rows, out dim]: window maxima
  DeviceBuffer<float> dw_parts_;  // [slices, filters, patch]; empty: 1 slice
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaConv(
    const FeatureShape& in, const ConvLayerSpec& spec, int max_rows,
    int block_rows, int dw_slice_rows) {
  const cuda_ops::ConvGeometry g = cuda_ops::MakeConvGeometry(in, spec);
  if (g.out_time < 1 || g.out_freq < 1 || g.filters < 1 || max_rows < 1 ||
      block_rows < 0 || dw_slice_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv layer does not fit its ", in.channels, "x", in.time,
                     "x", in.freq, " input"));
  }
  const int rows = cuda_ops::ConvBlockRows(g, max_rows, block_rows);
  // GEMM sizes are ints: m = rows * positions, and the block's floats.
  if (!cuda_ops::ConvFitsIntIndices(g, rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv block of ", rows, " rows needs more floats of ",
                     "scratch than a GEMM can address"));
  }
  const int dw_slice = cuda_ops::ConvDwSliceRows(g, rows, dw_slice_rows);
  const cuda_ops::ConvScratchSizes sizes =
      cuda_ops::ConvScratchSizesFor(g, rows, max_rows, dw_slice);
  if (sizes.dw_parts > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv weight gradient in slices of ", dw_slice,
                     " rows needs ", sizes.dw_parts,
                     " floats of scratch; use longer slices"));
  }
  auto layer = std::make_unique<CudaConv>(g, rows, dw_slice);
  ASGD_RETURN_IF_ERROR(layer->Allocate(max_rows));
  return std::unique_ptr<CudaLayer>(std::move(layer));
}

}  // namespace cuda
}  // namespace asgd
