#include "worker/cuda_options.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace asgd {

absl::StatusOr<CudaDnnOptions::MathMode> ParseCudaMathMode(
    absl::string_view text) {
  if (text == "fp32") return CudaDnnOptions::MathMode::kFp32;
  if (text == "tf32") return CudaDnnOptions::MathMode::kTf32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown CUDA math mode \"", text, "\" (fp32 or tf32)"));
}

absl::string_view CudaMathModeName(CudaDnnOptions::MathMode mode) {
  return mode == CudaDnnOptions::MathMode::kFp32 ? "fp32" : "tf32";
}

}  // namespace asgd
