// ProfileCudaLayers: where a training step's device time goes, layer by
// layer and step by step (each GEMM, element-wise pass and reduction a
// layer's CudaExec enqueues, OpTimer), for tuning kernels without a
// profiler. dnn_step_bench --cuda_profile prints it through the plugin
// (cuda_plugin.h).
//
// Each layer (hidden layers in order, then the output layer's affine part)
// runs alone on its own device buffers: random inputs, the model's initial
// parameters (InitialParams), a random output gradient copied in afresh
// before each backward pass. One untimed forward and backward pass, then
// `iters` timed ones. The first layer computes no input gradient, as in the
// backend. The loss and the pushes are not included.
//
// Internal to the plugin; compiled only by nvcc.
//
// Thread-safety: sets the calling thread's current device; one call at a
// time per device.
#ifndef ASGD_MODEL_CUDA_CUDA_PROFILE_H_
#define ASGD_MODEL_CUDA_CUDA_PROFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/cuda/cuda_options.h"
#include "model/model_spec.h"

namespace asgd {

// A markdown table, one block of rows per layer and pass: the pass's time
// (ms per pass, between events around it), then its steps by time, each
// with its calls per pass, ms per pass and share of the pass. InvalidArgument
// for an invalid spec or options, or sequences, steps or iters < 1; the
// CUDA errors of the layers otherwise.
absl::StatusOr<std::string> ProfileCudaLayers(const ModelSpec& spec,
                                              int sequences, int steps,
                                              const CudaOptions& options,
                                              int iters);

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_PROFILE_H_
