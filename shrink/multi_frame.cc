#include "shrink/multi_frame.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

absl::StatusOr<SavedModel> ToMultiFrame(const SavedModel& model, int frames) {
  const ModelSpec& spec = model.spec;
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (frames < 2 || frames > kMaxOutputFrames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output frames must be in [2, ", kMaxOutputFrames, "], got ", frames));
  }
  if (spec.output_frames != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model already has ", spec.output_frames, " output frames"));
  }
  if (spec.is_sequence()) {
    return absl::InvalidArgumentError(
        "a multi-frame model needs a frame model (no lstm)");
  }
  if (static_cast<int64_t>(model.params.size()) != ModelParamCount(spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", model.params.size(),
                     " parameters, its spec ", ModelParamCount(spec)));
  }
  SavedModel out;
  out.spec = spec;
  out.spec.output_frames = frames;
  out.pruned = model.pruned;
  const int output = static_cast<int>(spec.layers.size());
  const int64_t hidden = LayerParamOffset(spec, output);
  const int64_t weights =
      int64_t{spec.num_classes} * LayerInputShape(spec, output).dim();
  const auto first = model.params.begin();
  out.params.reserve(ModelParamCount(out.spec));
  out.params.assign(first, first + hidden);
  for (int k = 0; k < frames; ++k) {  // weight [k * C, in]: head after head
    out.params.insert(out.params.end(), first + hidden,
                      first + hidden + weights);
  }
  for (int k = 0; k < frames; ++k) {  // bias [k * C]
    out.params.insert(out.params.end(), first + hidden + weights,
                      model.params.end());
  }
  if (static_cast<int64_t>(out.params.size()) != ModelParamCount(out.spec)) {
    return absl::InternalError("multi-frame parameters do not fit the spec");
  }
  return out;
}

}  // namespace asgd
