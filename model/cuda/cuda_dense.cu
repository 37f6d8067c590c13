// The dense layer on a CUDA device: dense_impl.h's steps run with CudaExec.
// It needs no scratch of its own.
#include <memory>

#include "model/cuda/cuda_exec.cuh"
#include "model/cuda/cuda_layer.h"
#include "model/cuda/dense_impl.h"

namespace asgd {
namespace cuda {
namespace {

class CudaDense final : public CudaLayer {
 public:
  explicit CudaDense(const cuda_ops::DenseShape& shape) : shape_(shape) {}

  FeatureShape in_shape() const override { return {1, 1, shape_.in_dim}; }
  FeatureShape out_shape() const override { return {1, 1, shape_.units}; }

  absl::Status Forward(const Context& ctx, const float* params, const float* in,
                       int sequences, int steps, float* out) override {
    CudaExec exec(ctx);
    return cuda_ops::DenseForward(exec, shape_, params, in, sequences * steps,
                                  out);
  }

  absl::Status Backward(const Context& ctx, const float* params,
                        const float* in, const float* out, float* dout,
                        int sequences, int steps, float* dparams,
                        float* din) override {
    CudaExec exec(ctx);
    return cuda_ops::DenseBackward(exec, shape_, params, in, out, dout,
                                   sequences * steps, dparams, din);
  }

 private:
  const cuda_ops::DenseShape shape_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaDense(
    int in_dim, int units, Activation activation) {
  if (in_dim < 1 || units < 1) {
    return absl::InvalidArgumentError("bad dense layer sizes");
  }
  return std::unique_ptr<CudaLayer>(std::make_unique<CudaDense>(
      cuda_ops::DenseShape{in_dim, units, cuda_ops::ActOf(activation)}));
}

}  // namespace cuda
}  // namespace asgd
