// CudaLayer: the forward and backward pass of one hidden layer on a CUDA
// device, the GPU counterpart of model/layers/layer.h. Every layer type of
// model/model_spec.h implements it in this directory in two parts:
//   <kind>_impl.h   its steps (GEMMs and element-wise passes), mirroring its
//                   CPU implementation in model/layers/ GEMM for GEMM, as
//                   templates over an Exec (layer_math.h), so that they also
//                   run on the CPU in layer_impl_test.cc;
//   cuda_<kind>.cu  the CudaLayer: its device scratch, and the steps run
//                   with CudaExec (cuda_exec.cuh).
// (dense_impl.h + cuda_dense.cu, conv_impl.h + cuda_conv.cu, lstm_impl.h +
// cuda_lstm.cu.) CreateCudaLayer() picks the implementation for a LayerSpec,
// and the CUDA backend (cuda_backend.cu) runs them in order. A new layer type
// adds its two files, its factory below, its case in cuda_layer.cu and its
// check in layer_impl_test.cc.
//
// Data layout and parameters exactly as model/layers/layer.h: a batch is
// `sequences` × `steps` rows, time-major (row t * sequences + b is step t of
// sequence b); rows of in_shape().dim() and out_shape().dim() floats;
// `params` is the layer's part of the flat model (LayerTensors order),
// `dparams` the same part of the gradient. All pointers are device memory.
//
// Contract (as Layer, plus what a device needs):
//  * rows = sequences * steps is in [1, max_rows]; the backend checks this.
//  * Forward and Backward enqueue their work on ctx.stream and return
//    without waiting for it; a non-OK status means a launch or cuBLAS call
//    was refused (the backend then drains the streams and reports it).
//  * Forward writes all of `out` and keeps what Backward needs in the
//    layer's own device scratch. Backward follows the Forward of the same
//    batch, with the same `params`, `in` and `out`, on the same stream.
//  * Backward writes (not adds) all of `dparams`, and all of `din` unless it
//    is null. Unlike the CPU Layer, it may overwrite `dout` (the backend's
//    scratch) and does, to fold in the activation's derivative.
//  * No allocation after CreateCudaLayer; no pointers kept across calls.
//
// Internal to the plugin and compiled only by nvcc (it includes CUDA
// headers through cuda_util.h).
//
// Thread-safety: a CudaLayer owns device scratch; one thread at a time, and
// one set of layers per backend.
#ifndef ASGD_MODEL_CUDA_CUDA_LAYER_H_
#define ASGD_MODEL_CUDA_CUDA_LAYER_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/cuda/cuda_options.h"
#include "model/cuda/cuda_util.h"
#include "model/model_spec.h"

namespace asgd {
namespace cuda {

class CudaLayer {
 public:
  virtual ~CudaLayer() = default;

  virtual FeatureShape in_shape() const = 0;
  virtual FeatureShape out_shape() const = 0;

  virtual absl::Status Forward(const Context& ctx, const float* params,
                               const float* in, int sequences, int steps,
                               float* out) = 0;

  virtual absl::Status Backward(const Context& ctx, const float* params,
                                const float* in, const float* out, float* dout,
                                int sequences, int steps, float* dparams,
                                float* din) = 0;
};

// The CUDA implementation of hidden layer `index` of `spec` (index ==
// spec.layers.size(): the output layer's affine part, a dense layer of
// num_classes units without activation), with device scratch for max_rows
// rows allocated on the current device. `options` carries tuning knobs
// (conv_block_rows, conv_dw_slice_rows). InvalidArgument for an invalid spec,
// an index out of range or max_rows < 1; ResourceExhausted when device memory
// runs out.
absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaLayer(
    const ModelSpec& spec, int index, int max_rows, const CudaOptions& options);

// The implementations (cuda_dense.cu, cuda_conv.cu, cuda_lstm.cu); the
// arguments as ValidateModelSpec leaves them. A conv layer's block_rows > 0
// fixes its rows per im2col block, and dw_slice_rows > 0 the patch rows per
// slice of its weight gradient's GEMM; 0 lets it choose (conv_impl.h).
absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaDense(
    int in_dim, int units, Activation activation);
absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaConv(
    const FeatureShape& in, const ConvLayerSpec& spec, int max_rows,
    int block_rows, int dw_slice_rows);
absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaLstm(
    int in_dim, const LstmLayerSpec& spec, int max_rows);

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_LAYER_H_
