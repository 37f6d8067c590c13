#include "worker/data/frame_examples.h"

#include <algorithm>
#include <cstring>

namespace asgd {

void SpliceFrames(const Utterances& utterances, int64_t frame, int context,
                  float* out) {
  const int u = utterances.utterance_of(frame);
  const int64_t first = utterances.begin(u), last = utterances.end(u) - 1;
  const int dim = utterances.feature_dim();
  for (int k = -context; k <= context; ++k) {
    const int64_t f = std::clamp(frame + k, first, last);
    std::memcpy(out, utterances.frame(f), dim * sizeof(float));
    out += dim;
  }
}

FrameExamples::FrameExamples(const Utterances* utterances, int context,
                             int output_frames)
    : utt_(utterances), context_(context), output_frames_(output_frames) {}

void FrameExamples::Splice(int64_t frame, float* out) const {
  SpliceFrames(*utt_, frame, context_, out);
}

void FrameExamples::Fill(absl::Span<const int64_t> ids, float* inputs,
                         int32_t* labels) const {
  const int dim = input_dim();
  for (size_t i = 0; i < ids.size(); ++i) {
    Splice(ids[i], inputs + static_cast<int64_t>(i) * dim);
    if (output_frames_ == 1) {
      labels[i] = utt_->label(ids[i]);
      continue;
    }
    const int64_t end = utt_->end(utt_->utterance_of(ids[i]));
    int32_t* row = labels + static_cast<int64_t>(i) * output_frames_;
    for (int j = 0; j < output_frames_; ++j) {
      row[j] = ids[i] + j < end ? utt_->label(ids[i] + j) : kNoLabel;
    }
  }
}

void FrameExamples::FillTeacher(absl::Span<const int64_t> ids,
                                float* teacher) const {
  const int dim = utt_->teacher_dim();
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(teacher + static_cast<int64_t>(i) * dim, utt_->teacher(ids[i]),
                dim * sizeof(float));
  }
}

}  // namespace asgd
