// The two places a pipeline stage's weights can live (StageUpdater,
// stage_runner.h), both on the parameter servers' model:
//
//  * HandOffSgd (--pipeline_weights=local): pure pipelined
//    back-propagation. The stage updates only its own copy (plain SGD);
//    at the end, once the later stages have handed theirs off, it writes its
//    layers into the servers' model: pulls the current model, puts its layers
//    in and sends the whole as an ASSIGN push (so each stage's layers land
//    exactly, and the stages of one pipeline hand off one after another, the
//    last first).
//  * ServerSgd (--pipeline_weights=servers): the stage's layers live on the
//    servers, and several pipelines (replicas) can train them at once,
//    data-parallel through ASGD. Each update is applied locally (plain SGD,
//    for the stage's next forward passes) and sent to the servers as an ADD
//    push of -learning_rate * g over the stage's layers (zeros elsewhere, which
//    an ADD leaves exactly as they are; no optimizer state is touched); every
//    pull_every updates the stage pulls the servers' model and takes its
//    layers from it (what every replica's updates made of them). An ADD the
//    servers dropped as too stale, or refused as busy, is counted and not
//    resent (the next pull brings the servers' weights back); any other
//    error ends the stage. With one replica and pull_every 1 the weights are
//    those of HandOffSgd, bit for bit (w + (-(lr g)) == w - lr g).
//
// Thread-safety: the stage's thread.
#ifndef ASGD_WORKER_PIPELINE_STAGE_UPDATERS_H_
#define ASGD_WORKER_PIPELINE_STAGE_UPDATERS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/pipeline/stage_runner.h"
#include "worker/ps/param_client.h"

namespace asgd {

class HandOffSgd final : public StageUpdater {
 public:
  // `client` outlives the updater; the stage's layers are the flat range
  // [offset, offset + count) of the servers' model.
  HandOffSgd(ParamClient* client, int64_t offset, int64_t count,
             float learning_rate, int stage);

  absl::Status Apply(absl::Span<const float> grad,
                     absl::Span<float> params) override;
  absl::Status Finish(absl::Span<const float> params) override;

 private:
  ParamClient* const client_;
  const int64_t offset_, count_;
  const float learning_rate_;
  const int stage_;
};

class ServerSgd final : public StageUpdater {
 public:
  // As HandOffSgd; `versions` those of the model the stage started from;
  // pull_every >= 1.
  ServerSgd(ParamClient* client, int64_t offset, int64_t count,
            float learning_rate, int pull_every, int stage,
            std::vector<uint64_t> versions);

  absl::Status Apply(absl::Span<const float> grad,
                     absl::Span<float> params) override;
  absl::Status Finish(absl::Span<const float>) override {
    return absl::OkStatus();
  }

  // ADD pushes the servers applied (every server its part), and those some
  // server dropped as stale or refused as busy.
  int64_t applied() const { return applied_; }
  int64_t dropped() const { return dropped_; }
  int64_t pulls() const { return pulls_; }

 private:
  ParamClient* const client_;
  const int64_t offset_, count_;
  const float learning_rate_;
  const int pull_every_, stage_;
  std::vector<uint64_t> versions_;
  std::vector<float> change_;  // the model's size; zeros but the stage's
  std::vector<float> pulled_;  // the model's size
  int64_t updates_ = 0, applied_ = 0, dropped_ = 0, pulls_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_UPDATERS_H_
