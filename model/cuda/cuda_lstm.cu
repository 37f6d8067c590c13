// The LSTM layer on a CUDA device: lstm_impl.h's steps run with CudaExec, on
// device scratch sized by LstmScratchSizesFor.
#include <memory>

#include "common/status_macros.h"
#include "model/cuda/cuda_exec.cuh"
#include "model/cuda/cuda_layer.h"
#include "model/cuda/lstm_impl.h"

namespace asgd {
namespace cuda {
namespace {

class CudaLstm final : public CudaLayer {
 public:
  explicit CudaLstm(const cuda_ops::LstmShape& shape) : shape_(shape) {}

  absl::Status Allocate(int max_rows) {
    const cuda_ops::LstmScratchSizes sizes =
        cuda_ops::LstmScratchSizesFor(shape_, max_rows);
    for (int d = 0; d < shape_.directions; ++d) {
      Cache& c = cache_[d];
      ASGD_ASSIGN_OR_RETURN(c.gates, DeviceBuffer<float>::Create(sizes.gates));
      ASGD_ASSIGN_OR_RETURN(c.cell, DeviceBuffer<float>::Create(sizes.cell));
      ASGD_ASSIGN_OR_RETURN(c.tanh_c, DeviceBuffer<float>::Create(sizes.cell));
      ASGD_ASSIGN_OR_RETURN(c.hidden,
                            DeviceBuffer<float>::Create(sizes.hidden));
    }
    ASGD_ASSIGN_OR_RETURN(dgates_, DeviceBuffer<float>::Create(sizes.dgates));
    ASGD_ASSIGN_OR_RETURN(drec_, DeviceBuffer<float>::Create(sizes.drec));
    ASGD_ASSIGN_OR_RETURN(dhidden_, DeviceBuffer<float>::Create(sizes.dhidden));
    ASGD_ASSIGN_OR_RETURN(dcell_, DeviceBuffer<float>::Create(sizes.dcell));
    return absl::OkStatus();
  }

  FeatureShape in_shape() const override { return {1, 1, shape_.in_dim}; }
  FeatureShape out_shape() const override { return {1, 1, shape_.out_dim}; }

  absl::Status Forward(const Context& ctx, const float* params, const float* in,
                       int sequences, int steps, float* out) override {
    CudaExec exec(ctx);
    return cuda_ops::LstmForward(exec, shape_, Scratch(), params, in, sequences,
                                 steps, out);
  }

  absl::Status Backward(const Context& ctx, const float* params,
                        const float* in, const float* out, float* dout,
                        int sequences, int steps, float* dparams,
                        float* din) override {
    CudaExec exec(ctx);
    return cuda_ops::LstmBackward(exec, shape_, Scratch(), params, in, out,
                                  dout, sequences, steps, dparams, din);
  }

 private:
  // What Forward keeps of one direction (lstm_impl.h's LstmCache).
  struct Cache {
    DeviceBuffer<float> gates, cell, tanh_c, hidden;
  };

  cuda_ops::LstmScratch Scratch() const {
    cuda_ops::LstmScratch s;
    for (int d = 0; d < shape_.directions; ++d) {
      s.cache[d].gates = cache_[d].gates.get();
      s.cache[d].cell = cache_[d].cell.get();
      s.cache[d].tanh_c = cache_[d].tanh_c.get();
      s.cache[d].hidden = cache_[d].hidden.get();
    }
    s.dgates = dgates_.get();
    s.drec = drec_.get();
    s.dhidden = dhidden_.get();
    s.dcell = dcell_.get();
    return s;
  }

  const cuda_ops::LstmShape shape_;
  Cache cache_[2];
  DeviceBuffer<float> dgates_, drec_, dhidden_, dcell_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaLstm(
    int in_dim, const LstmLayerSpec& spec, int max_rows) {
  if (in_dim < 1 || spec.cells < 1 || spec.projection < 0 || max_rows < 1) {
    return absl::InvalidArgumentError("bad LSTM layer sizes");
  }
  auto layer =
      std::make_unique<CudaLstm>(cuda_ops::MakeLstmShape(in_dim, spec));
  ASGD_RETURN_IF_ERROR(layer->Allocate(max_rows));
  return std::unique_ptr<CudaLayer>(std::move(layer));
}

}  // namespace cuda
}  // namespace asgd
