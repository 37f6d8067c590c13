#include "worker/backend_flags.h"

#include "absl/flags/flag.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, backend, "auto",
          "Math backend: cpu (OpenBLAS), cuda (cuBLAS; fails without a GPU) or "
          "auto (cuda when a GPU is present, else cpu, with a log line). "
          "--mode=pipeline: each stage's layers compute on it.");
ABSL_FLAG(std::string, cuda_math, "tf32",
          "CUDA GEMM precision: tf32 (tensor cores, fp32 storage) or fp32.");
ABSL_FLAG(int, cuda_device, 0, "CUDA device index for --backend=cuda/auto.");

namespace asgd {

std::string BackendFromFlags() { return absl::GetFlag(FLAGS_backend); }

absl::StatusOr<CudaOptions> CudaOptionsFromFlags() {
  CudaOptions options;
  options.device = absl::GetFlag(FLAGS_cuda_device);
  ASGD_ASSIGN_OR_RETURN(options.math,
                        ParseCudaMathMode(absl::GetFlag(FLAGS_cuda_math)));
  return options;
}

}  // namespace asgd
