// FrameExamples: the examples of a frame model (DNN, CNN): one per frame,
// the row being 2*context+1 consecutive frames centred on it (frames past an
// utterance's edge repeat the edge frame), labelled with the centre frame's
// label.
//
// Thread-safety: immutable; may be shared.
#ifndef ASGD_WORKER_DATA_FRAME_EXAMPLES_H_
#define ASGD_WORKER_DATA_FRAME_EXAMPLES_H_

#include <cstdint>

#include "worker/data/examples.h"
#include "worker/data/utterances.h"

namespace asgd {

class FrameExamples final : public ExampleSet {
 public:
  // `utterances` must outlive this object.
  FrameExamples(const Utterances* utterances, int context,
                int output_frames = 1);

  int64_t num_examples() const override { return utt_->num_frames(); }
  int input_dim() const override {
    return (2 * context_ + 1) * utt_->feature_dim();
  }
  int steps() const override { return 1; }
  int max_labelled_steps() const override { return 1; }
  int64_t labelled_frames() const override { return utt_->num_frames(); }
  int labels_per_row() const override { return output_frames_; }
  void Fill(absl::Span<const int64_t> ids, float* inputs,
            int32_t* labels) const override;
  int teacher_dim() const override { return utt_->teacher_dim(); }
  void FillTeacher(absl::Span<const int64_t> ids,
                   float* teacher) const override;
  double MajorityClassRate() const override {
    return utt_->MajorityClassRate();
  }

  // Writes the spliced row of frame `frame` (input_dim() floats) to `out`.
  void Splice(int64_t frame, float* out) const;

 private:
  const Utterances* const utt_;
  const int context_;
  const int output_frames_;
};

// Writes the 2*context+1 frames centred on `frame` (edge frames repeated at
// its utterance's boundaries) to `out`: shared by frame and sequence
// examples.
void SpliceFrames(const Utterances& utterances, int64_t frame, int context,
                  float* out);

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_FRAME_EXAMPLES_H_
