// The two sides of a pipeline stage (pipelined back-propagation, see
// stage_runner.h), as small interfaces so that the schedule and its tests do
// not depend on gRPC: the upstream hands the stage its minibatches'
// inputs and takes back the gradients with respect to them; the downstream
// takes the stage's outputs and gives back the gradients with respect to
// them. Stage 0's upstream is the training data (data_upstream.h); the
// last stage has no downstream (it computes the loss). Between stages they
// are one gRPC stream (stage_grpc_service.h, stage_grpc_client.h).
//
// Minibatches are numbered 0, 1, 2, ... in the order the upstream sends
// them; every link answers them in that order.
//
// Thread-safety: a link is used by its stage's thread only (Abort may come
// from any thread).
#ifndef ASGD_WORKER_PIPELINE_STAGE_LINK_H_
#define ASGD_WORKER_PIPELINE_STAGE_LINK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace asgd {

// A minibatch on its way up the stages: rows = sequences × steps rows of
// activations, and the labels the last stage's loss needs.
struct StageBatch {
  uint64_t seq = 0;
  int sequences = 0;
  int steps = 1;
  std::vector<float> values;    // rows × the receiving stage's input width
  std::vector<int32_t> labels;  // rows × output_frames (kNoLabel allowed)
  // Held-out data: forward passes only, no update; the answer has no
  // values, only the counts.
  bool evaluate = false;
  int rows() const { return sequences * steps; }
};

// The answer to StageBatch `seq`: the loss's gradient with respect to its
// values (empty toward the data and for evaluate), and what the last stage
// measured.
struct StageGrad {
  uint64_t seq = 0;
  std::vector<float> values;
  double loss = 0;
  int labelled = 0;
  int correct = 0;
};

class UpstreamLink {
 public:
  virtual ~UpstreamLink() = default;
  // The next minibatch, or nullopt once the upstream has sent its last.
  virtual absl::StatusOr<std::optional<StageBatch>> Receive() = 0;
  // Answers the oldest unanswered minibatch.
  virtual absl::Status Answer(StageGrad grad) = 0;
  // After the last answer: the stage is done.
  virtual absl::Status Finish() = 0;
  // The stage failed with `status`; the upstream learns it (and stops).
  virtual void Abort(const absl::Status& status) = 0;
};

class DownstreamLink {
 public:
  virtual ~DownstreamLink() = default;
  virtual absl::Status Send(const StageBatch& batch) = 0;
  // After the last Send: there are no more (answers still come).
  virtual absl::Status SendEnd() = 0;
  // The answer to the oldest minibatch sent and not yet answered.
  virtual absl::StatusOr<StageGrad> Receive() = 0;
  // After SendEnd and the last answer: waits for the downstream to finish.
  virtual absl::Status Finish() = 0;
  // The stage failed with `status`; the downstream learns it (and stops).
  virtual void Abort(const absl::Status& status) = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_LINK_H_
