// DataUpstream: stage 0's UpstreamLink (stage_link.h): minibatches from the
// training data, and the answers that come back booked as training steps
// (LoopReporter: the progress lines and TrainerObserver of every mode).
// It ends the input when the source is used up or the loop's max_steps or
// time budget is reached.
//
// Thread-safety: the stage's thread.
#ifndef ASGD_WORKER_PIPELINE_DATA_UPSTREAM_H_
#define ASGD_WORKER_PIPELINE_DATA_UPSTREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "worker/data/batch_source.h"
#include "worker/data/make_examples.h"
#include "worker/loop/loop.h"
#include "worker/pipeline/stage_link.h"

namespace asgd {

class DataUpstream final : public UpstreamLink {
 public:
  // All pointers outlive the upstream. `extra` gives the end of each
  // progress line.
  DataUpstream(BatchSource* source, const BatchShape& shape, int input_dim,
               int labels_per_row, const LoopOptions& loop,
               LoopReporter* reporter, TrainResult* result,
               std::function<std::string()> extra);

  absl::StatusOr<std::optional<StageBatch>> Receive() override;
  absl::Status Answer(StageGrad grad) override;
  absl::Status Finish() override;
  void Abort(const absl::Status&) override {}

  // Minibatches drawn so far.
  int64_t drawn() const { return drawn_; }

 private:
  struct Drawn {
    int frames = 0;
    double data_seconds = 0;
  };

  BatchSource* const source_;
  const LoopOptions loop_;
  LoopReporter* const reporter_;
  TrainResult* const result_;
  std::function<std::string()> extra_;
  BatchBuffer buffer_;
  int64_t drawn_ = 0;
  std::deque<Drawn> pending_;
  absl::Time last_answer_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_DATA_UPSTREAM_H_
