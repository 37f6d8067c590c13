#include "model/layer_range.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

absl::Status CheckLayerRange(const ModelSpec& spec, int first, int last,
                             int max_rows) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  const int total = static_cast<int>(spec.layers.size()) + 1;
  if (first < 0 || last > total || first >= last) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer range [", first, ", ", last,
                     ") is empty or outside the model's ", total, " layers"));
  }
  if (max_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows must be >= 1, got ", max_rows));
  }
  return absl::OkStatus();
}

LayerRange::LayerRange(const ModelSpec& spec, int first, int last)
    : first_(first),
      last_(last),
      has_loss_(last == static_cast<int>(spec.layers.size()) + 1),
      param_offset_(LayerParamOffset(spec, first)),
      param_count_(LayerParamOffset(spec, last) - param_offset_),
      in_dim_(LayerInputShape(spec, first).dim()),
      out_dim_(LayerOutputShape(spec, last - 1).dim()) {}

}  // namespace asgd
