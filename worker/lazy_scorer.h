// LazyScorer: lazy output evaluation (model/lazy_output.h) over whole
// utterances of a frame model (DNN, CNN), for a decoder that asks for some
// pdfs per frame: the hidden layers run in batches of rows on the CPU (a
// LayerRange over the layers below the output layer; each frame with its
// context, as in training and in UtteranceScorer), then one dot product per
// active pdf. The scores are logits, the log-posteriors plus one constant
// per frame (the softmax's normaliser, which a decoder comparing the states
// of a frame does without).
//
// With compare_full, it also runs the full output layer on the same hidden
// outputs, one frame at a time (a matrix-vector product per frame, as an
// online decoder would) and in batches (one matrix-matrix product), and
// keeps the largest difference between the lazy scores and the full layer's
// at the same entries: what lazy evaluation saves, on the lists given.
//
//   auto scorer = LazyScorer::Create(spec, params, {});
//   std::vector<float> scores;  // active.pdfs.size()
//   ASGD_RETURN_IF_ERROR((*scorer)->Logits(features, frames, active,
//                                          &scores));
//
// Thread-safety: one thread at a time (it owns its scratch).
#ifndef ASGD_WORKER_LAZY_SCORER_H_
#define ASGD_WORKER_LAZY_SCORER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/layer_range.h"
#include "model/lazy_output.h"
#include "model/model_spec.h"

namespace asgd {

struct LazyScorerOptions {
  int batch_rows = 1024;         // rows per hidden-layer pass, >= 1
  int64_t max_frames = 1 << 17;  // longest utterance accepted, in [1, 2^24]
  bool compare_full = false;     // also time the full output layer
};

// Totals over every Logits call.
struct LazyScorerStats {
  int64_t frames = 0;
  int64_t active = 0;              // scores computed (active pdfs, repeats)
  double hidden_seconds = 0;       // the layers below the output layer
  double lazy_seconds = 0;         // the active pdfs' dot products
  double full_one_seconds = 0;     // compare_full: a frame at a time
  double full_batch_seconds = 0;   // compare_full: batches of batch_rows
  float max_abs_difference = 0;    // compare_full: |lazy - full|, largest
};

class LazyScorer {
 public:
  // `params` is copied. InvalidArgument for a bad spec, a parameter count
  // other than the spec's, a recurrent or multi-frame model (whose rows are
  // not frames), or bad options.
  static absl::StatusOr<std::unique_ptr<LazyScorer>> Create(
      const ModelSpec& spec, absl::Span<const float> params,
      const LazyScorerOptions& options);

  // `features`: frames × spec.feature_dim, normalised as in training;
  // `active`: the pdfs asked for at each of the frames. Writes
  // active.pdfs.size() logits to `out`, in `active`'s order.
  // InvalidArgument for a size mismatch, more than max_frames frames, or
  // active lists that CheckActiveOutputs refuses.
  absl::Status Logits(absl::Span<const float> features, int64_t frames,
                      const ActiveOutputs& active, std::vector<float>* out);

  const LazyScorerStats& stats() const { return stats_; }
  int num_classes() const { return output_.classes; }

 private:
  LazyScorer(const ModelSpec& spec, std::vector<float> params,
             const LazyScorerOptions& options);
  // The full layer on h_ (frames rows), timed both ways; updates the stats.
  void CompareFull(int64_t frames, const ActiveOutputs& active,
                   absl::Span<const float> lazy);

  const ModelSpec spec_;
  const std::vector<float> params_;
  const LazyScorerOptions options_;
  std::unique_ptr<LayerRange> hidden_;  // null for a model without hidden
                                        // layers (h is the input row)
  OutputLayerView output_;              // into params_
  std::vector<float> rows_;             // a batch of input rows
  std::vector<float> h_;                // frames × output_.in
  std::vector<float> full_;             // compare_full: frames × classes
  LazyScorerStats stats_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_LAZY_SCORER_H_
