#include "worker/utterance_scorer.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cpu_backend.h"
#include "worker/data/frame_examples.h"
#include "worker/data/utterances.h"

namespace asgd {

BackendFactory CpuBackendFactory() {
  return [](const ModelSpec& spec, int max_rows) {
    return CreateCpuBackend(spec, max_rows);
  };
}

UtteranceScorer::UtteranceScorer(const ModelSpec& spec,
                                 absl::Span<const float> params,
                                 BackendFactory factory,
                                 const ScorerOptions& options)
    : spec_(spec),
      params_(params.begin(), params.end()),
      factory_(std::move(factory)),
      options_(options) {}

absl::StatusOr<std::unique_ptr<UtteranceScorer>> UtteranceScorer::Create(
    const ModelSpec& spec, absl::Span<const float> params,
    BackendFactory factory, const ScorerOptions& options) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (static_cast<int64_t>(params.size()) != ModelParamCount(spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", params.size(), " parameters, its spec ",
        ModelParamCount(spec)));
  }
  if (options.batch_rows < 1 || options.max_frames < 1 ||
      options.max_frames > (int64_t{1} << 24) || !factory) {
    return absl::InvalidArgumentError(
        "UtteranceScorer: batch_rows >= 1, max_frames in [1, 2^24] and a "
        "backend factory are needed");
  }
  if (options.frame_skip < 1 || options.frame_skip > 100 ||
      (options.frame_skip > 1 && spec.is_sequence())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame skipping of ", options.frame_skip, " (want 1 to 100; only 1 "
        "for a recurrent model, which reads every frame)"));
  }
  if (options.frame_skip > 1 && spec.output_frames > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame skipping of ", options.frame_skip, " with a model of ",
        spec.output_frames, " output frames: a multi-frame model already "
        "computes one frame in ", spec.output_frames, " (keep 1)"));
  }
  return std::unique_ptr<UtteranceScorer>(
      new UtteranceScorer(spec, params, std::move(factory), options));
}

absl::Status UtteranceScorer::EnsureBackend(int64_t rows) {
  if (backend_ != nullptr && backend_->max_rows() >= rows) {
    return absl::OkStatus();
  }
  // Grow in powers of two, so that a few long utterances do not rebuild it
  // each time.
  int64_t size = 64;
  while (size < rows) size *= 2;
  size = std::min<int64_t>(size, std::max<int64_t>(rows, options_.max_frames));
  backend_.reset();  // free the old buffers first
  ASGD_ASSIGN_OR_RETURN(backend_, factory_(spec_, static_cast<int>(size)));
  return absl::OkStatus();
}

absl::Status UtteranceScorer::LogPosteriors(absl::Span<const float> features,
                                            int64_t frames,
                                            std::vector<float>* out) {
  const int dim = spec_.feature_dim;
  if (frames < 0 || static_cast<int64_t>(features.size()) != frames * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UtteranceScorer: ", features.size(), " values for ", frames,
        " frames of ", dim));
  }
  if (frames > options_.max_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("an utterance of ", frames, " frames, more than the ",
                     options_.max_frames, " accepted"));
  }
  const int classes = spec_.num_classes;
  out->assign(frames * classes, 0.0f);
  if (frames == 0) return absl::OkStatus();
  // The utterance as the example code sees it; the labels are not read.
  Utterances utt(dim);
  utt.Add(features, std::vector<int32_t>(frames, 0));
  FrameExamples rows(&utt, spec_.context);
  const int in_dim = spec_.input_dim();
  if (spec_.is_sequence()) {
    ASGD_RETURN_IF_ERROR(EnsureBackend(frames));
    inputs_.resize(frames * in_dim);
    labels_.assign(frames, kNoLabel);
    for (int64_t t = 0; t < frames; ++t) rows.Splice(t, &inputs_[t * in_dim]);
    const Batch batch{1, static_cast<int>(frames), inputs_, labels_};
    return backend_->LogPosteriors(params_, batch, absl::MakeSpan(*out));
  }
  // Frames 0, k, 2k, ... (all of them without skipping) in batches; their
  // scores go straight to `out`, or with skipping to computed_ first. A
  // multi-frame model's row at frame t scores frames t .. t + m - 1: rows
  // every m frames, whose heads lie in computed_ in frame order.
  const int m = spec_.output_frames;
  const int k = m > 1 ? m : options_.frame_skip;
  const int64_t computed = (frames + k - 1) / k;
  const int64_t per_row = int64_t{m} * classes;
  const int batch_rows =
      static_cast<int>(std::min<int64_t>(options_.batch_rows, computed));
  ASGD_RETURN_IF_ERROR(EnsureBackend(batch_rows));
  if (k > 1) computed_.resize(computed * per_row);
  float* scores = k > 1 ? computed_.data() : out->data();
  std::vector<int64_t> ids;
  for (int64_t first = 0; first < computed; first += batch_rows) {
    const int n =
        static_cast<int>(std::min<int64_t>(batch_rows, computed - first));
    ids.resize(n);
    for (int i = 0; i < n; ++i) ids[i] = (first + i) * k;
    inputs_.resize(int64_t{n} * in_dim);
    labels_.resize(n);
    rows.Fill(ids, inputs_.data(), labels_.data());
    const Batch batch{n, 1, inputs_, labels_};
    ASGD_RETURN_IF_ERROR(backend_->LogPosteriors(
        params_, batch,
        absl::MakeSpan(scores + first * per_row, int64_t{n} * per_row)));
  }
  if (k == 1) return absl::OkStatus();
  if (m > 1) {  // head j of row r is frame r * m + j
    std::copy_n(computed_.data(), frames * classes, out->data());
    return absl::OkStatus();
  }
  for (int64_t t = 0; t < frames; ++t) {  // score copying
    std::copy_n(computed_.data() + (t / k) * classes, classes,
                out->data() + t * classes);
  }
  return absl::OkStatus();
}

}  // namespace asgd
