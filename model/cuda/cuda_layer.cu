#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cuda/cuda_layer.h"

namespace asgd {
namespace cuda {

absl::StatusOr<std::unique_ptr<CudaLayer>> CreateCudaLayer(
    const ModelSpec& spec, int index, int max_rows,
    const CudaOptions& options) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  const int num = static_cast<int>(spec.layers.size());
  if (index < 0 || index > num) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer index ", index, " outside [0, ", num, "]"));
  }
  if (max_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows must be >= 1, got ", max_rows));
  }
  const FeatureShape in = LayerInputShape(spec, index);
  if (index == num) {
    return CreateCudaDense(in.dim(), spec.output_dim(), Activation::kNone);
  }
  const LayerSpec& layer = spec.layers[index];
  switch (layer.kind) {
    case LayerKind::kDense:
      return CreateCudaDense(in.dim(), layer.dense.units,
                             layer.dense.activation);
    case LayerKind::kConv:
      return CreateCudaConv(in, layer.conv, max_rows, options.conv_block_rows,
                            options.conv_dw_slice_rows);
    case LayerKind::kLstm:
      return CreateCudaLstm(in.dim(), layer.lstm, max_rows);
  }
  return absl::InternalError(
      absl::StrCat("unknown layer kind ", static_cast<int>(layer.kind)));
}

}  // namespace cuda
}  // namespace asgd
