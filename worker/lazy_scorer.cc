#include "worker/lazy_scorer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cpu_layer_range.h"
#include "worker/data/frame_examples.h"
#include "worker/data/utterances.h"

namespace asgd {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

LazyScorer::LazyScorer(const ModelSpec& spec, std::vector<float> params,
                       const LazyScorerOptions& options)
    : spec_(spec), params_(std::move(params)), options_(options) {}

absl::StatusOr<std::unique_ptr<LazyScorer>> LazyScorer::Create(
    const ModelSpec& spec, absl::Span<const float> params,
    const LazyScorerOptions& options) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (static_cast<int64_t>(params.size()) != ModelParamCount(spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", params.size(), " parameters, its spec ",
        ModelParamCount(spec)));
  }
  if (spec.is_sequence() || spec.output_frames > 1) {
    return absl::InvalidArgumentError(
        "lazy output evaluation scores frame models of one output frame "
        "(DNN, CNN): a recurrent or multi-frame model's rows are not frames");
  }
  if (options.batch_rows < 1 || options.max_frames < 1 ||
      options.max_frames > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        "LazyScorer: batch_rows >= 1 and max_frames in [1, 2^24] are needed");
  }
  std::unique_ptr<LazyScorer> scorer(new LazyScorer(
      spec, std::vector<float>(params.begin(), params.end()), options));
  ASGD_ASSIGN_OR_RETURN(scorer->output_, OutputLayerOf(spec, scorer->params_));
  const int hidden_layers = static_cast<int>(spec.layers.size());
  if (hidden_layers > 0) {
    ASGD_ASSIGN_OR_RETURN(
        scorer->hidden_,
        CreateCpuLayerRange(spec, 0, hidden_layers, options.batch_rows));
  }
  return scorer;
}

absl::Status LazyScorer::Logits(absl::Span<const float> features,
                                int64_t frames, const ActiveOutputs& active,
                                std::vector<float>* out) {
  const int dim = spec_.feature_dim;
  if (frames < 0 || static_cast<int64_t>(features.size()) != frames * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LazyScorer: ", features.size(), " values for ", frames,
        " frames of ", dim));
  }
  if (frames > options_.max_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("an utterance of ", frames, " frames, more than the ",
                     options_.max_frames, " accepted"));
  }
  ASGD_RETURN_IF_ERROR(CheckActiveOutputs(active, frames, output_.classes));
  out->assign(active.pdfs.size(), 0.0f);
  if (frames == 0) return absl::OkStatus();

  // The hidden layers' outputs h of every frame, in batches of rows.
  const Clock::time_point hidden_start = Clock::now();
  Utterances utt(dim);
  utt.Add(features, std::vector<int32_t>(frames, 0));  // labels unread
  FrameExamples rows(&utt, spec_.context);
  const int in_dim = spec_.input_dim();
  const int h_dim = output_.in;
  h_.resize(frames * h_dim);
  std::vector<int64_t> ids;
  std::vector<int32_t> labels;
  for (int64_t first = 0; first < frames; first += options_.batch_rows) {
    const int n = static_cast<int>(
        std::min<int64_t>(options_.batch_rows, frames - first));
    ids.resize(n);
    for (int i = 0; i < n; ++i) ids[i] = first + i;
    labels.resize(n);
    if (hidden_ == nullptr) {  // h is the input row itself
      rows.Fill(ids, h_.data() + first * h_dim, labels.data());
      continue;
    }
    rows_.resize(int64_t{n} * in_dim);
    rows.Fill(ids, rows_.data(), labels.data());
    ASGD_RETURN_IF_ERROR(hidden_->Forward(
        params_.data() + hidden_->param_offset(), rows_.data(), n, 1));
    std::copy_n(hidden_->out(), int64_t{n} * h_dim, h_.data() + first * h_dim);
  }
  stats_.hidden_seconds += SecondsSince(hidden_start);

  const Clock::time_point lazy_start = Clock::now();
  LazyLogits(output_, h_.data(), active, out->data());
  stats_.lazy_seconds += SecondsSince(lazy_start);
  stats_.frames += frames;
  stats_.active += static_cast<int64_t>(active.pdfs.size());
  if (options_.compare_full) CompareFull(frames, active, *out);
  return absl::OkStatus();
}

void LazyScorer::CompareFull(int64_t frames, const ActiveOutputs& active,
                             absl::Span<const float> lazy) {
  const int classes = output_.classes;
  const int h_dim = output_.in;
  full_.resize(frames * classes);
  Clock::time_point start = Clock::now();
  for (int64_t f = 0; f < frames; ++f) {
    FullLogits(output_, h_.data() + f * h_dim, 1, full_.data() + f * classes);
  }
  stats_.full_one_seconds += SecondsSince(start);
  start = Clock::now();
  for (int64_t first = 0; first < frames; first += options_.batch_rows) {
    const int64_t n = std::min<int64_t>(options_.batch_rows, frames - first);
    FullLogits(output_, h_.data() + first * h_dim, n,
               full_.data() + first * classes);
  }
  stats_.full_batch_seconds += SecondsSince(start);
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t k = active.begin[f]; k < active.begin[f + 1]; ++k) {
      const float d = std::fabs(lazy[k] - full_[f * classes + active.pdfs[k]]);
      // NaN is kept as the largest difference (it compares false).
      if (!(d <= stats_.max_abs_difference)) stats_.max_abs_difference = d;
    }
  }
}

}  // namespace asgd
