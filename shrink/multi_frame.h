// A multi-frame model (model/model_spec.h, output_frames = k) made from a
// trained one-frame model, as a warm start for retraining through the
// servers: the hidden layers are kept, and every head's output weights and
// biases start as copies of the model's output layer. Until retraining,
// every head predicts the row's own frame (the model scores as frame
// skipping does); retraining teaches head j the frame j ahead.
//
//   ASGD_ASSIGN_OR_RETURN(SavedModel multi, ToMultiFrame(model, 3));
//
// Thread-safety: a pure function.
#ifndef ASGD_SHRINK_MULTI_FRAME_H_
#define ASGD_SHRINK_MULTI_FRAME_H_

#include "absl/status/statusor.h"
#include "model/model_file.h"

namespace asgd {

// InvalidArgument for k outside [2, kMaxOutputFrames], a model that already
// has several output frames, a sequence model, or parameters that do not
// fit the spec. Pruned tensors stay pruned (the heads copy their zeros).
absl::StatusOr<SavedModel> ToMultiFrame(const SavedModel& model, int frames);

}  // namespace asgd

#endif  // ASGD_SHRINK_MULTI_FRAME_H_
