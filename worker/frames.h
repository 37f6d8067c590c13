// FrameData: the frames a worker trains or evaluates on, normalised and ready
// to be spliced into DNN inputs.
//
// Each input row is 2*context+1 consecutive feature frames centred on one
// frame (frames past an utterance's edge repeat the edge frame), after
// normalising each dimension with the corpus's training mean and stddev.
// MinibatchSampler walks the frames in a fresh seeded random order each
// epoch.
//
// Thread-safety: FrameData is immutable after construction and may be shared.
// A MinibatchSampler is used by one thread.
#ifndef ASGD_WORKER_FRAMES_H_
#define ASGD_WORKER_FRAMES_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "corpus/corpus_io.h"

namespace asgd {

class FrameData {
 public:
  // Keeps the utterances u with u % num_parts == part (part 0 of 1: all).
  FrameData(const corpus::CorpusInfo& info,
            const std::vector<corpus::Utterance>& utterances, int context,
            int part = 0, int num_parts = 1);

  int64_t num_frames() const { return static_cast<int64_t>(labels_.size()); }
  int input_dim() const { return (2 * context_ + 1) * feature_dim_; }
  int32_t label(int64_t frame) const { return labels_[frame]; }

  // Writes the spliced input of `frame` (input_dim() floats) to `out`.
  void Splice(int64_t frame, float* out) const;

  // Fraction of frames whose label is the most frequent one (the accuracy of
  // always guessing it).
  double MajorityClassRate() const;

 private:
  int feature_dim_;
  int context_;
  std::vector<float> features_;   // normalised, [num_frames, feature_dim]
  std::vector<int32_t> labels_;
  std::vector<int64_t> utt_begin_;  // per frame: first frame of its utterance
  std::vector<int64_t> utt_end_;    // per frame: one past its last frame
};

// The frame order of epoch `epoch` of a dataset of `num_frames` frames: a
// permutation every worker derives identically from `seed` (used with the
// shared minibatch pool, whose batch ids index into it).
std::vector<int64_t> EpochOrder(int64_t num_frames, uint64_t seed,
                                uint64_t epoch);

class MinibatchSampler {
 public:
  MinibatchSampler(const FrameData* data, uint64_t seed);

  // Fills `inputs` ([n, input_dim]) and `labels` (n) with the next n frames.
  void Next(int n, absl::Span<float> inputs, absl::Span<int32_t> labels);

  // Frames drawn so far divided by the data size.
  double epochs() const;

 private:
  const FrameData* data_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  size_t next_ = 0;
  int64_t drawn_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_FRAMES_H_
