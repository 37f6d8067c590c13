#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/conv.h"
#include "model/layers/dense.h"
#include "model/layers/layer.h"
#include "model/layers/lstm.h"

namespace asgd {

absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const ModelSpec& spec,
                                                   int index, int max_rows) {
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
    return std::make_unique<DenseLayer>(in.dim(), spec.output_dim(),
                                        Activation::kNone, max_rows);
  }
  const LayerSpec& layer = spec.layers[index];
  switch (layer.kind) {
    case LayerKind::kDense:
      return std::make_unique<DenseLayer>(in.dim(), layer.dense.units,
                                          layer.dense.activation, max_rows);
    case LayerKind::kConv:
      return std::make_unique<ConvLayer>(in, layer.conv, max_rows);
    case LayerKind::kLstm:
      return std::make_unique<LstmLayer>(in.dim(), layer.lstm, max_rows);
  }
  return absl::InternalError(
      absl::StrCat("unknown layer kind ", static_cast<int>(layer.kind)));
}

}  // namespace asgd
