// SequenceExamples: the examples of a sequence model (LSTM, BLSTM): chunks
// of consecutive frames of one utterance.
//
// Every utterance is cut into chunks of `chunk_frames` labelled frames (the
// last one of an utterance may be shorter). Each chunk is extended by
// `left_context` frames before it and `right_context` after it that the
// model reads but is not trained or scored on (kNoLabel), so that a
// recurrent layer starts from a warmed-up state and a backward layer sees
// the future: every example has left_context + chunk_frames +
// right_context steps. Frames past an utterance's edge, and the missing
// frames of a short last chunk, repeat the edge frame and are unlabelled.
// Each row is the frame spliced with the model's own context (usually 0 for
// recurrent models). Training on such chunks from a zero initial state is
// truncated backpropagation through time at chunk boundaries.
//
// Every labelled frame lies in exactly one chunk, so evaluating over all
// examples scores every frame once.
//
// Thread-safety: immutable; may be shared.
#ifndef ASGD_WORKER_DATA_SEQUENCE_EXAMPLES_H_
#define ASGD_WORKER_DATA_SEQUENCE_EXAMPLES_H_

#include <cstdint>
#include <vector>

#include "worker/data/examples.h"
#include "worker/data/utterances.h"

namespace asgd {

struct ChunkOptions {
  int chunk_frames = 20;
  int left_context = 10;
  int right_context = 0;
};

class SequenceExamples final : public ExampleSet {
 public:
  // `utterances` must outlive this object. Sizes must be valid (see
  // ValidateChunkOptions in make_examples.h).
  SequenceExamples(const Utterances* utterances, int context,
                   const ChunkOptions& chunks);

  int64_t num_examples() const override {
    return static_cast<int64_t>(chunk_start_.size());
  }
  int input_dim() const override {
    return (2 * context_ + 1) * utt_->feature_dim();
  }
  int steps() const override {
    return chunks_.left_context + chunks_.chunk_frames + chunks_.right_context;
  }
  int max_labelled_steps() const override { return chunks_.chunk_frames; }
  int64_t labelled_frames() const override { return utt_->num_frames(); }
  void Fill(absl::Span<const int64_t> ids, float* inputs,
            int32_t* labels) const override;
  int teacher_dim() const override { return utt_->teacher_dim(); }
  void FillTeacher(absl::Span<const int64_t> ids,
                   float* teacher) const override;
  double MajorityClassRate() const override {
    return utt_->MajorityClassRate();
  }

 private:
  const Utterances* const utt_;
  const int context_;
  const ChunkOptions chunks_;
  std::vector<int64_t> chunk_start_;  // first labelled frame of each chunk
};

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_SEQUENCE_EXAMPLES_H_
