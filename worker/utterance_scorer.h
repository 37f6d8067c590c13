// UtteranceScorer: the log-posteriors of whole utterances under a model, for
// decoding (asgd_forward) and for checking exported models. Frame models
// (DNN, CNN) see each frame with its context (frames past the utterance's
// edges repeat the edge frame, as in training), in batches of rows;
// sequence models (LSTM, BLSTM) see the whole utterance as one sequence from
// a zero state, so a bidirectional layer reads all of it (training sees
// chunks; decoding needs no truncation).
//
// Frame skipping (frame models): with frame_skip = k only frames 0, k, 2k,
// ... are computed, and each frame takes the scores of the last computed
// frame at or before it (score copying): 1/k of the forward passes.
// A multi-frame model (output_frames m > 1, model/model_spec.h) computes
// frames 0, m, 2m, ... likewise, but frame t + j takes head j of frame t's
// row: its own prediction instead of a copy.
//
//   auto scorer = UtteranceScorer::Create(spec, params, CpuBackendFactory());
//   std::vector<float> logp;  // frames × num_classes
//   ASGD_RETURN_IF_ERROR((*scorer)->LogPosteriors(features, frames, &logp));
//
// Thread-safety: one thread at a time (it owns a backend).
#ifndef ASGD_WORKER_UTTERANCE_SCORER_H_
#define ASGD_WORKER_UTTERANCE_SCORER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/backend.h"
#include "model/model_spec.h"

namespace asgd {

// Makes a backend of `spec` for batches of up to `max_rows` rows.
using BackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<ModelBackend>>(
        const ModelSpec& spec, int max_rows)>;

// The CPU backend (model/cpu_backend.h).
BackendFactory CpuBackendFactory();

struct ScorerOptions {
  int batch_rows = 1024;           // frame models: rows per forward pass
  int64_t max_frames = 1 << 17;    // longest utterance accepted (21 min)
  int frame_skip = 1;              // frame models: compute every k-th frame
};

class UtteranceScorer {
 public:
  // `params` is copied. InvalidArgument for a bad spec, a parameter count
  // other than the spec's, or bad options (frame_skip outside [1, 100], or
  // above 1 for a sequence model or a multi-frame model).
  static absl::StatusOr<std::unique_ptr<UtteranceScorer>> Create(
      const ModelSpec& spec, absl::Span<const float> params,
      BackendFactory factory, const ScorerOptions& options = {});

  // `features`: frames × spec.feature_dim, normalised as in training.
  // Writes frames × num_classes log-posteriors (natural log) to `out`.
  // InvalidArgument for a size mismatch or more than max_frames frames;
  // the backend's errors.
  absl::Status LogPosteriors(absl::Span<const float> features, int64_t frames,
                             std::vector<float>* out);

  const ModelSpec& spec() const { return spec_; }

 private:
  UtteranceScorer(const ModelSpec& spec, absl::Span<const float> params,
                  BackendFactory factory, const ScorerOptions& options);
  // A backend for at least `rows` rows (sequence models grow it).
  absl::Status EnsureBackend(int64_t rows);

  const ModelSpec spec_;
  const std::vector<float> params_;
  const BackendFactory factory_;
  const ScorerOptions options_;
  std::unique_ptr<ModelBackend> backend_;
  std::vector<float> inputs_;
  std::vector<int32_t> labels_;
  std::vector<float> computed_;  // frame skipping: the computed frames' scores
};

}  // namespace asgd

#endif  // ASGD_WORKER_UTTERANCE_SCORER_H_
