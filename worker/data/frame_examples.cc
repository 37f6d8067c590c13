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

FrameExamples::FrameExamples(const Utterances* utterances, int context)
    : utt_(utterances), context_(context) {}

void FrameExamples::Splice(int64_t frame, float* out) const {
  SpliceFrames(*utt_, frame, context_, out);
}

void FrameExamples::Fill(absl::Span<const int64_t> ids, float* inputs,
                         int32_t* labels) const {
  const int dim = input_dim();
  for (size_t i = 0; i < ids.size(); ++i) {
    Splice(ids[i], inputs + static_cast<int64_t>(i) * dim);
    labels[i] = utt_->label(ids[i]);
  }
}

}  // namespace asgd
