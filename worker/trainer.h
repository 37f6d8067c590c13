// Trainer: a worker's ASGD loop and held-out evaluation.
//
// Each step: pull the model from the pool, draw a minibatch from this
// worker's part of the training frames, compute the gradient with the
// backend, push it with the versions it was computed from. No worker waits
// for another. The loop ends after max_steps steps or when the worker has
// seen `epochs` passes over its part of the data, whichever comes first.
//
// Progress goes to `log` every log_every steps:
//   worker 0 step 200 epoch 0.41 loss 1.873 batch-acc 44.5% frames/s 5120 staleness 1
// and, when eval_every > 0, a held-out accuracy line every eval_every steps.
//
// Thread-safety: one Trainer per thread; it uses its ParamClient and backend
// exclusively while Run() executes.
#ifndef ASGD_WORKER_TRAINER_H_
#define ASGD_WORKER_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/dnn.h"
#include "worker/frames.h"
#include "worker/param_client.h"

namespace asgd {

struct TrainerOptions {
  int worker_index = 0;
  int batch_size = 256;
  int64_t max_steps = 0;  // 0: no limit
  double epochs = 1.0;    // passes over this worker's data; 0: no limit
  int log_every = 100;
  int eval_every = 0;     // 0: only at the end
  uint64_t seed = 1;
};

struct TrainResult {
  int64_t steps = 0;
  int64_t frames = 0;
  double seconds = 0;
  double last_loss = 0;
  double heldout_accuracy = -1;  // -1 when there is no held-out data
  int64_t pushes_dropped = 0;
  std::vector<float> params;     // the last pulled model
};

// Frame accuracy of `params` on every frame of `data`, in batches of the
// backend's max batch size (`batch`).
absl::StatusOr<double> EvaluateAccuracy(DnnBackend* backend,
                                        absl::Span<const float> params,
                                        const FrameData& data, int batch);

// Checks that `backend`'s model matches the pool's layout.
absl::Status CheckModelMatchesLayout(const DnnSpec& spec,
                                     const ModelLayout& layout);

// Reconstructs the DnnSpec from the pool's tensors and attributes.
absl::StatusOr<DnnSpec> DnnSpecFromPool(const ParamClient& client);

class Trainer {
 public:
  // `heldout` may be null. All pointers must outlive the trainer.
  Trainer(ParamClient* client, DnnBackend* backend, const FrameData* train,
          const FrameData* heldout, const TrainerOptions& options,
          std::ostream* log);

  absl::StatusOr<TrainResult> Run();

 private:
  ParamClient* const client_;
  DnnBackend* const backend_;
  const FrameData* const train_;
  const FrameData* const heldout_;
  const TrainerOptions options_;
  std::ostream* const log_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_TRAINER_H_
