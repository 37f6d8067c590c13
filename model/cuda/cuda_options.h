// Options of the CUDA backend, usable without CUDA (flag parsing, the
// backend factory): the backend itself is a plugin (see cuda_plugin.h).
#ifndef ASGD_MODEL_CUDA_CUDA_OPTIONS_H_
#define ASGD_MODEL_CUDA_CUDA_OPTIONS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd {

struct CudaOptions {
  // CUDA device ordinal. The backend sets it as the calling thread's current
  // device at the start of every call.
  int device = 0;
  enum class MathMode {
    kFp32,  // CUBLAS_COMPUTE_32F: plain fp32 GEMMs
    kTf32,  // CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores, fp32 accumulate
  };
  MathMode math = MathMode::kTf32;
  // Rows per im2col block of the conv layers (their patch buffers hold
  // block rows × output positions × patch floats); 0 picks it so that each
  // buffer stays within 16 Mi floats. Tests set small values to run several
  // blocks.
  int conv_block_rows = 0;
  // Patch rows per slice of a conv layer's weight gradient GEMM, summed in
  // a fixed order afterwards (conv_impl.h); 0 picks 2,048, raised so that a
  // block has at most 32 slices. A value of at least a block's patch rows
  // makes it one GEMM. Tests set small values to run several slices; the
  // step bench compares both.
  int conv_dw_slice_rows = 0;
};

// "fp32" / "tf32"; InvalidArgument otherwise.
absl::StatusOr<CudaOptions::MathMode> ParseCudaMathMode(
    absl::string_view text);
absl::string_view CudaMathModeName(CudaOptions::MathMode mode);

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_OPTIONS_H_
