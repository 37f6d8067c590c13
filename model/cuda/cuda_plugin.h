// The CUDA backend as a plugin: libasgd_cuda.so exports one C symbol,
// asgd_cuda_plugin_api(), returning this table. The worker loads it with
// dlopen only when a CUDA backend is asked for (see cuda_loader.h), so that
// asgd_worker itself needs no CUDA library: it runs on machines without one,
// and loading cuBLAS (whose libcublasLt breaks civetweb's startup, and so the
// metrics endpoint, when loaded first) happens after the metrics endpoint is
// up.
//
// Both sides are built from this tree with the same compiler and the same
// shared Abseil, so C++ types cross the boundary; kCudaPluginAbiVersion
// guards against mixing builds: bump it whenever this table or a type it
// passes (ModelSpec, ModelBackend, CudaOptions) changes, or a stale plugin
// left next to a new worker would read the new types with the old layout.
#ifndef ASGD_MODEL_CUDA_CUDA_PLUGIN_H_
#define ASGD_MODEL_CUDA_CUDA_PLUGIN_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/model_spec.h"
#include "model/cuda/cuda_options.h"
#include "model/backend.h"
#include "model/layer_range.h"

namespace asgd {

// 4: CudaOptions::conv_block_rows; the plugin computes every layer kind.
// 5: ModelBackend's resident model (LoadModel .. ReadResidual).
// 6: Batch::teacher (teacher-student training; refused by the plugin until
//    the soft-target pass, loss_impl.h, with the same ABI).
// 7: ModelSpec::output_frames (multi-frame models; refused by the plugin
//    until its heads were computed, with the same ABI).
// 8: create_range (a pipeline stage's layers, model/layer_range.h).
// 9: ModelBackend::TakeTopK (top-k pushes encoded on the device).
// 10: ModelBackend::stages_batches, StageNext (the next minibatch uploaded
//     while this one computes).
// 11: CudaOptions::conv_dw_slice_rows; profile_layers.
// 12: ModelBackend::DownloadMirror (MirrorFromCopy no longer writes the
//     host buffer).
inline constexpr int kCudaPluginAbiVersion = 12;

struct CudaPluginApi {
  int abi_version;
  absl::StatusOr<std::unique_ptr<ModelBackend>> (*create)(
      const ModelSpec& spec, int max_batch, const CudaOptions& options);
  // A pipeline stage's layers [first, last) on options.device
  // (cuda_layer_range.h).
  absl::StatusOr<std::unique_ptr<LayerRange>> (*create_range)(
      const ModelSpec& spec, int first, int last, int max_rows,
      const CudaOptions& options);
  absl::StatusOr<std::string> (*device_name)(int device);
  // OK when a CUDA device is usable, else kUnavailable with the reason.
  absl::Status (*device_status)();
  // Each layer's passes timed step by step on options.device
  // (cuda_profile.h): a markdown table.
  absl::StatusOr<std::string> (*profile_layers)(const ModelSpec& spec,
                                                int sequences, int steps,
                                                const CudaOptions& options,
                                                int iters);
};

}  // namespace asgd

// Defined by libasgd_cuda.so.
extern "C" const asgd::CudaPluginApi* asgd_cuda_plugin_api();

#endif  // ASGD_MODEL_CUDA_CUDA_PLUGIN_H_
