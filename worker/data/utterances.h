// Utterances: the feature frames a worker trains or evaluates on, normalised,
// with one label per frame, kept grouped by utterance so that examples never
// mix two utterances.
//
//   Utterances train = Utterances::FromCorpus(corpus.info, corpus.train,
//                                            /*part=*/w, /*num_parts=*/n);
//   FrameExamples frames(&train, /*context=*/5);
//
// Thread-safety: immutable once filled; may then be shared by threads.
#ifndef ASGD_WORKER_DATA_UTTERANCES_H_
#define ASGD_WORKER_DATA_UTTERANCES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "corpus/corpus_io.h"

namespace asgd {

class Utterances {
 public:
  // With teacher_dim > 0, every frame also holds a teacher's log-posteriors
  // (teacher-student training from an archive).
  explicit Utterances(int feature_dim, int teacher_dim = 0)
      : feature_dim_(feature_dim), teacher_dim_(teacher_dim) {}

  // The utterances u with u % num_parts == part (part 0 of 1: all), each
  // dimension normalised with the corpus's training mean and stddev
  // (corpus::FeatureNormaliser, whose results LoadCorpus checks).
  static Utterances FromCorpus(const corpus::CorpusInfo& info,
                               const std::vector<corpus::Utterance>& utterances,
                               int part = 0, int num_parts = 1);

  // Appends one utterance of labels.size() frames, features already
  // normalised (features.size() == labels.size() * feature_dim()), and
  // with teacher_dim() > 0 its teacher rows (labels.size() * teacher_dim()
  // log-posteriors; more are cut, fewer padded with zeros). An utterance
  // without frames is not added.
  void Add(absl::Span<const float> features, absl::Span<const int32_t> labels,
           absl::Span<const float> teacher = {});

  // Removes every utterance, keeping the storage (a window reused).
  void Clear();
  // Allocates for `frames` frames in `utterances` utterances in all.
  void Reserve(int64_t frames, int64_t utterances);
  // Bytes of storage held per frame (features, teacher row, label,
  // utterance index).
  static int64_t BytesPerFrame(int feature_dim, int teacher_dim = 0) {
    return (int64_t{feature_dim} + teacher_dim) * 4 + 8;
  }

  int feature_dim() const { return feature_dim_; }
  int teacher_dim() const { return teacher_dim_; }
  int64_t num_frames() const { return static_cast<int64_t>(labels_.size()); }
  int num_utterances() const { return static_cast<int>(starts_.size()); }
  // Frames [begin(u), end(u)) belong to utterance u.
  int64_t begin(int u) const { return starts_[u]; }
  int64_t end(int u) const {
    return u + 1 < num_utterances() ? starts_[u + 1] : num_frames();
  }
  // The utterance frame f belongs to.
  int utterance_of(int64_t f) const { return utterance_[f]; }
  const float* frame(int64_t f) const { return &features_[f * feature_dim_]; }
  int32_t label(int64_t f) const { return labels_[f]; }
  // teacher_dim() > 0 only.
  const float* teacher(int64_t f) const { return &teacher_[f * teacher_dim_]; }

  // Fraction of frames whose label is the most frequent one (the accuracy
  // of always guessing it).
  double MajorityClassRate() const;

 private:
  int feature_dim_;
  int teacher_dim_;
  std::vector<float> features_;  // [num_frames, feature_dim]
  std::vector<float> teacher_;   // [num_frames, teacher_dim]
  std::vector<int32_t> labels_;
  std::vector<int32_t> utterance_;  // per frame
  std::vector<int64_t> starts_;     // per utterance: its first frame
};

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_UTTERANCES_H_
