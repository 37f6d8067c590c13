#include "model/lazy_output.h"

#include <cblas.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

absl::StatusOr<OutputLayerView> OutputLayerOf(const ModelSpec& spec,
                                              absl::Span<const float> params) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  const int64_t total = ModelParamCount(spec);
  if (static_cast<int64_t>(params.size()) != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", params.size(),
                     " parameters; its spec wants ", total));
  }
  if (spec.output_frames > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lazy output evaluation takes a model of one output frame, not ",
        spec.output_frames));
  }
  const int output = static_cast<int>(spec.layers.size());
  OutputLayerView view;
  view.classes = spec.num_classes;
  view.in = static_cast<int>(LayerParamCount(spec, output) / spec.num_classes -
                             1);
  view.weight = params.data() + LayerParamOffset(spec, output);
  view.bias = view.weight + int64_t{view.classes} * view.in;
  return view;
}

absl::Status CheckActiveOutputs(const ActiveOutputs& active, int64_t frames,
                                int classes) {
  if (active.frames() != frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("active pdf lists for ", active.frames(),
                     " frames; the utterance has ", frames));
  }
  if (active.begin.front() != 0 ||
      active.begin.back() != static_cast<int64_t>(active.pdfs.size())) {
    return absl::InvalidArgumentError(
        "active pdf lists: offsets do not span the list of pdfs");
  }
  for (int64_t f = 0; f < frames; ++f) {
    if (active.begin[f + 1] < active.begin[f]) {
      return absl::InvalidArgumentError(
          absl::StrCat("active pdf lists: frame ", f, "'s offsets decrease"));
    }
  }
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t k = active.begin[f]; k < active.begin[f + 1]; ++k) {
      const int32_t p = active.pdfs[k];
      if (p < 0 || p >= classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("active pdf ", p, " at frame ", f,
                         " is outside the model's ", classes, " pdfs"));
      }
    }
  }
  return absl::OkStatus();
}

void LazyLogits(const OutputLayerView& layer, const float* h,
                const ActiveOutputs& active, float* out) {
  const int in = layer.in;
  for (int64_t f = 0; f < active.frames(); ++f) {
    const float* hf = h + f * in;
    for (int64_t k = active.begin[f]; k < active.begin[f + 1]; ++k) {
      const int32_t p = active.pdfs[k];
      out[k] = layer.bias[p] +
               cblas_sdot(in, layer.weight + int64_t{p} * in, 1, hf, 1);
    }
  }
}

void FullLogits(const OutputLayerView& layer, const float* h, int64_t frames,
                float* out) {
  const int c = layer.classes;
  for (int64_t f = 0; f < frames; ++f) {
    std::copy(layer.bias, layer.bias + c, out + f * c);
  }
  if (frames == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, c, layer.in, 1.0f, layer.weight,
                layer.in, h, 1, 1.0f, out, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
              static_cast<int>(frames), c, layer.in, 1.0f, h, layer.in,
              layer.weight, layer.in, 1.0f, out, c);
}

}  // namespace asgd
