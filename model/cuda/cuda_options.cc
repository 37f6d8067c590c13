#include "model/cuda/cuda_options.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace asgd {

absl::StatusOr<CudaOptions::MathMode> ParseCudaMathMode(
    absl::string_view text) {
  if (text == "fp32") return CudaOptions::MathMode::kFp32;
  if (text == "tf32") return CudaOptions::MathMode::kTf32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown CUDA math mode \"", text, "\" (fp32 or tf32)"));
}

absl::string_view CudaMathModeName(CudaOptions::MathMode mode) {
  return mode == CudaOptions::MathMode::kFp32 ? "fp32" : "tf32";
}

}  // namespace asgd
