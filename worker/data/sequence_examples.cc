#include "worker/data/sequence_examples.h"

#include <algorithm>

#include "worker/data/frame_examples.h"

namespace asgd {

SequenceExamples::SequenceExamples(const Utterances* utterances, int context,
                                   const ChunkOptions& chunks)
    : utt_(utterances), context_(context), chunks_(chunks) {
  for (int u = 0; u < utt_->num_utterances(); ++u) {
    for (int64_t f = utt_->begin(u); f < utt_->end(u);
         f += chunks_.chunk_frames) {
      chunk_start_.push_back(f);
    }
  }
}

void SequenceExamples::Fill(absl::Span<const int64_t> ids, float* inputs,
                            int32_t* labels) const {
  const int n = static_cast<int>(ids.size());
  const int dim = input_dim();
  const int steps = this->steps();
  for (int b = 0; b < n; ++b) {
    const int64_t start = chunk_start_[ids[b]];
    const int u = utt_->utterance_of(start);
    const int64_t first = utt_->begin(u), last = utt_->end(u) - 1;
    const int64_t labelled_end =
        std::min<int64_t>(start + chunks_.chunk_frames, last + 1);
    for (int t = 0; t < steps; ++t) {
      const int64_t f = start - chunks_.left_context + t;
      const int64_t row = int64_t{t} * n + b;
      SpliceFrames(*utt_, std::clamp(f, first, last), context_,
                   inputs + row * dim);
      labels[row] =
          f >= start && f < labelled_end ? utt_->label(f) : kNoLabel;
    }
  }
}

void SequenceExamples::FillTeacher(absl::Span<const int64_t> ids,
                                   float* teacher) const {
  const int n = static_cast<int>(ids.size());
  const int dim = utt_->teacher_dim();
  for (int b = 0; b < n; ++b) {
    const int64_t start = chunk_start_[ids[b]];
    const int u = utt_->utterance_of(start);
    const int64_t first = utt_->begin(u), last = utt_->end(u) - 1;
    for (int t = 0; t < steps(); ++t) {
      const int64_t f =
          std::clamp<int64_t>(start - chunks_.left_context + t, first, last);
      std::copy_n(utt_->teacher(f), dim,
                  teacher + (int64_t{t} * n + b) * dim);
    }
  }
}

}  // namespace asgd
