// MakeExamples: the ExampleSet a model trains on, chosen by its spec: frames
// for frame models (DNN, CNN), chunks for sequence models (LSTM, BLSTM),
// with the spec's context.
//
//   DataOptions data;                       // chunk sizes (sequence models)
//   auto train = MakeExamples(spec, &utterances, data);
//   BatchShape shape = ShapeOfBatch(**train, /*batch_frames=*/256);
//   auto backend = CreateCpuBackend(spec, shape.rows());
//
// Thread-safety: pure functions.
#ifndef ASGD_WORKER_DATA_MAKE_EXAMPLES_H_
#define ASGD_WORKER_DATA_MAKE_EXAMPLES_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_spec.h"
#include "worker/data/examples.h"
#include "worker/data/sequence_examples.h"
#include "worker/data/utterances.h"

namespace asgd {

struct DataOptions {
  // Labelled frames per chunk (sequence models).
  int chunk_frames = 20;
  // Extra frames before and after each chunk; -1: 10 before, and 10 after
  // for bidirectional models (0 for unidirectional ones).
  int left_context = -1;
  int right_context = -1;
};

// The chunking `spec` gets with `options` (defaults resolved).
ChunkOptions ResolveChunkOptions(const ModelSpec& spec,
                                 const DataOptions& options);

// InvalidArgument unless chunk_frames is in [1, 10000] and the contexts in
// [-1, 10000].
absl::Status ValidateDataOptions(const DataOptions& options);

// FailedPrecondition when the utterances' feature dimension is not the
// model's; otherwise the examples (which keep a pointer to `utterances`).
absl::StatusOr<std::unique_ptr<ExampleSet>> MakeExamples(
    const ModelSpec& spec, const Utterances* utterances,
    const DataOptions& options);

// FailedPrecondition, saying what differs, unless the data's features per
// frame and classes are the model's.
absl::Status CheckDataFitsModel(int feature_dim, int num_classes,
                                const ModelSpec& spec);

// How many examples make a minibatch of about `batch_frames` labelled
// frames: batch_frames frames, or batch_frames / chunk_frames chunks (at
// least 1).
struct BatchShape {
  int examples = 1;
  int steps = 1;
  int rows() const { return examples * steps; }
};
BatchShape ShapeOfBatch(const ExampleSet& examples, int batch_frames);

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_MAKE_EXAMPLES_H_
