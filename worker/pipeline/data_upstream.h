// DataUpstream: stage 0's UpstreamLink (stage_link.h): minibatches from the
// training data, and the answers that come back booked as training steps
// (LoopReporter: the progress lines and TrainerObserver of every mode).
// It ends the input when the source is used up or the loop's max_steps or
// time budget is reached.
//
// With held-out data it evaluates through the pipeline: when the loop's
// cadence (eval_every, eval_every_s) says so, it sends the held-out
// minibatches of an evaluation (eval_frames of them, evenly strided) as
// evaluate minibatches between the training ones, and once all are
// answered logs and records the accuracy (the eval line of every mode,
// version: the training steps answered so far). The final model is the
// servers' after the hand-off (asgd_eval --servers).
//
// Thread-safety: the stage's thread.
#ifndef ASGD_WORKER_PIPELINE_DATA_UPSTREAM_H_
#define ASGD_WORKER_PIPELINE_DATA_UPSTREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/data/make_examples.h"
#include "worker/loop/loop.h"
#include "worker/pipeline/stage_link.h"

namespace asgd {

class DataUpstream final : public UpstreamLink {
 public:
  // All pointers outlive the upstream. `extra` gives the end of each
  // progress line.
  // `heldout` may be null (no evaluations); `reporter` must have been made
  // with the same held-out data.
  DataUpstream(BatchSource* source, const BatchShape& shape, int input_dim,
               int labels_per_row, const ExampleSet* heldout,
               const LoopOptions& loop, LoopReporter* reporter,
               TrainResult* result, std::function<std::string()> extra);

  absl::StatusOr<std::optional<StageBatch>> Receive() override;
  absl::Status Answer(StageGrad grad) override;
  absl::Status Finish() override;
  void Abort(const absl::Status&) override {}

  // Minibatches sent so far (training and evaluation).
  int64_t drawn() const { return drawn_; }

 private:
  struct Drawn {
    int frames = 0;
    double data_seconds = 0;
    bool evaluate = false;
  };

  // Queues the held-out minibatches of one evaluation.
  void StartEvaluation();
  StageBatch NextEvaluation();
  void BookEvaluation(const StageGrad& grad);

  BatchSource* const source_;
  const LoopOptions loop_;
  LoopReporter* const reporter_;
  TrainResult* const result_;
  std::function<std::string()> extra_;
  BatchBuffer buffer_;
  const ExampleSet* const heldout_;
  std::unique_ptr<BatchBuffer> heldout_buffer_;
  int heldout_per_batch_ = 1;
  std::deque<std::vector<int64_t>> eval_queue_;  // of the evaluation sent
  int eval_outstanding_ = 0;                     // sent, not answered
  int64_t eval_correct_ = 0, eval_labelled_ = 0;
  int64_t last_eval_steps_ = -1;
  bool data_done_ = false;
  int64_t drawn_ = 0;    // minibatches sent, training and evaluation
  int64_t trained_ = 0;  // training minibatches sent
  std::deque<Drawn> pending_;
  absl::Time last_answer_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_DATA_UPSTREAM_H_
