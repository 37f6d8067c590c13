// The CUDA plugin's LayerRange (model/layer_range.h): a pipeline stage's
// layers [first, last) computed by the CUDA layers of cuda_layer.h on one
// device, in the CUDA backend's order (the output layer's affine part is
// its last CudaLayer; the loss is the host's SoftmaxLoss, as the CPU range
// computes it, on logits downloaded from the device).
//
// Per call, host memory in and out: Forward uploads the stage's weights and
// its input rows and downloads the output rows; Backward uploads the output
// gradient (or the loss's, after Loss) and downloads the weights' gradient
// and the input gradient. Backward computes with the weights and input its
// Forward uploaded (LayerRange's contract: the same params and in), so its
// `params` and `in` are not read again. Each call waits for its copies:
// what it returns is complete.
//
// Each range has its own stream, cuBLAS handle and device memory (the
// stage's weights and gradient, its activations for max_rows rows), and
// sets options.device as the calling thread's device in every call.
//
// Internal to the plugin (built by nvcc into libasgd_cuda.so); the worker
// reaches it through CudaPluginApi::create_range (cuda_plugin.h) and
// model/backend_factory.h's LayerRangeFactoryFor. This header includes no
// CUDA header.
//
// Thread-safety: one thread at a time per range.
#ifndef ASGD_MODEL_CUDA_CUDA_LAYER_RANGE_H_
#define ASGD_MODEL_CUDA_CUDA_LAYER_RANGE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/cuda/cuda_options.h"
#include "model/layer_range.h"
#include "model/model_spec.h"

namespace asgd {

// InvalidArgument as CheckLayerRange and for options CheckCudaOptions
// (cuda_util.h) refuses; the device's errors (Unavailable without one,
// ResourceExhausted when its memory runs out).
absl::StatusOr<std::unique_ptr<LayerRange>> CreateCudaLayerRange(
    const ModelSpec& spec, int first, int last, int max_rows,
    const CudaOptions& options);

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_LAYER_RANGE_H_
