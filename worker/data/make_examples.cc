#include "worker/data/make_examples.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/data/frame_examples.h"

namespace asgd {

ChunkOptions ResolveChunkOptions(const ModelSpec& spec,
                                 const DataOptions& options) {
  bool bidirectional = false;
  for (const LayerSpec& l : spec.layers) {
    bidirectional |= l.kind == LayerKind::kLstm && l.lstm.bidirectional;
  }
  ChunkOptions chunks;
  chunks.chunk_frames = options.chunk_frames;
  chunks.left_context = options.left_context >= 0 ? options.left_context : 10;
  chunks.right_context = options.right_context >= 0
                             ? options.right_context
                             : (bidirectional ? 10 : 0);
  return chunks;
}

absl::Status ValidateDataOptions(const DataOptions& options) {
  constexpr int kMax = 10000;
  if (options.chunk_frames < 1 || options.chunk_frames > kMax ||
      options.left_context < -1 || options.left_context > kMax ||
      options.right_context < -1 || options.right_context > kMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_frames must be in [1, ", kMax, "] and the chunk contexts in "
        "[-1, ", kMax, "] (-1: the model's default), got ",
        options.chunk_frames, ", ", options.left_context, ", ",
        options.right_context));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExampleSet>> MakeExamples(
    const ModelSpec& spec, const Utterances* utterances,
    const DataOptions& options) {
  ASGD_RETURN_IF_ERROR(ValidateDataOptions(options));
  if (utterances->feature_dim() != spec.feature_dim) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the data has ", utterances->feature_dim(),
        " features per frame but the model takes ", spec.feature_dim));
  }
  if (spec.is_sequence()) {
    return std::unique_ptr<ExampleSet>(new SequenceExamples(
        utterances, spec.context, ResolveChunkOptions(spec, options)));
  }
  return std::unique_ptr<ExampleSet>(
      new FrameExamples(utterances, spec.context, spec.output_frames));
}

absl::Status CheckDataFitsModel(int feature_dim, int num_classes,
                                const ModelSpec& spec) {
  if (feature_dim != spec.feature_dim) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the data has ", feature_dim, " features per frame but the model "
        "takes ", spec.feature_dim));
  }
  if (num_classes != spec.num_classes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the data has ", num_classes, " classes but the model ",
        spec.num_classes, ": it was not trained for these labels"));
  }
  return absl::OkStatus();
}

BatchShape ShapeOfBatch(const ExampleSet& examples, int batch_frames) {
  BatchShape shape;
  shape.steps = examples.steps();
  shape.examples = std::max(1, batch_frames / examples.max_labelled_steps());
  return shape;
}

}  // namespace asgd
