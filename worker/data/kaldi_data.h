// Kaldi data directories as the worker trains and evaluates on them
// (kaldi/data_source.h reads them): a training part streamed with bounded
// memory (KaldiUtteranceStream, for StreamSource), and utterances loaded
// whole (the held-out set, and the training set of the shared minibatch
// pool, whose batches need every example at hand), all within one budget.
//
// The budget, KaldiInput::memory_bytes, is split:
//   * 1/2  the training examples: StreamSource's window when streaming, the
//          whole training set when loaded (more is refused);
//   * 1/4  the held-out set, loaded whole (more is refused);
//   * 1/16 the labels of each source kept in memory (the rest spill to an
//          unlinked file in temp_dir);
//   * 1/32 the data source's shuffle buffer (at most 64 utterances);
//   * the rest: the utterance being read, the archive buffers (64 KiB per
//     open archive, at most 16), a minibatch.
// Not bounded by it: the index of the part's utterances (about 120 bytes +
// the key each) and the CMVN statistics per speaker.
//
// Features are normalised per speaker with cmvn.scp (as apply-cmvn does:
// means, and variances with norm_vars), then with global statistics when
// given (the models have no input normalisation of their own: see
// worker/kaldi_flags.h); class ids are pdf ids, the class count the largest
// pdf id of all alignments + 1 unless given.
//
// Thread-safety: a stream is used by one thread; the functions are
// reentrant.
#ifndef ASGD_WORKER_DATA_KALDI_DATA_H_
#define ASGD_WORKER_DATA_KALDI_DATA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kaldi/bad_data.h"
#include "kaldi/data_source.h"
#include "model/model_spec.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/data/make_examples.h"
#include "worker/data/stream_source.h"
#include "worker/data/utterances.h"

namespace asgd {

struct KaldiInput {
  std::string data_dir;    // feats.scp [utt2spk cmvn.scp]
  std::string alignments;  // pdf-id archives: files and globs
  kaldi::BadDataPolicy policy = kaldi::BadDataPolicy::kRefuse;
  kaldi::CmvnMode cmvn = kaldi::CmvnMode::kAuto;
  bool norm_vars = false;
  // Applied after the per-speaker CMVN (KaldiDataOptions::global_cmvn);
  // empty: none.
  kaldi::DoubleMatrix global_cmvn;
  std::string global_cmvn_source = "none";  // for the log
  int32_t num_classes = 0;  // 0: the largest pdf id + 1
  // Features per frame every utterance must have: the model's (an utterance
  // of another dimension is bad data dim_mismatch, wherever it is); 0: the
  // most common among the first utterances (KaldiDataOptions::feature_dim).
  int32_t feature_dim = 0;
  // |feature| above this, as read or after CMVN, is bad data
  // feature_magnitude (KaldiDataOptions::max_feature_magnitude).
  float max_feature_magnitude = kaldi::kDefaultMaxFeatureMagnitude;
  int64_t memory_bytes = int64_t{1} << 30;
  std::string temp_dir = "/tmp";
  // Teacher-student training from an archive (KaldiDataOptions::teacher_scp:
  // per-utterance teacher log-posteriors); empty: none.
  std::string teacher_scp;
  // Called with the error of every utterance skipped under kSkip.
  std::function<void(const absl::Status&)> on_skip;
};

// The shares of the budget (see above).
inline int64_t TrainingExampleBytes(const KaldiInput& in) {
  return in.memory_bytes / 2;
}
inline int64_t HeldoutExampleBytes(const KaldiInput& in) {
  return in.memory_bytes / 4;
}

// The data-source options of part `part` of `num_parts` of `in`.
kaldi::KaldiDataOptions KaldiSourceOptions(const KaldiInput& in, int part,
                                           int num_parts, bool shuffle);

// A training part read in passes (StreamSource's input).
class KaldiUtteranceStream final : public UtteranceStream {
 public:
  // The errors of KaldiDataSource::Create (bad data under kRefuse, I/O).
  static absl::StatusOr<std::unique_ptr<KaldiUtteranceStream>> Open(
      const KaldiInput& in, int part, int num_parts);

  int feature_dim() const override { return source_->feature_dim(); }
  int teacher_dim() const override {
    return source_->has_teacher() ? source_->num_classes() : 0;
  }
  void StartPass(uint64_t seed, uint64_t pass) override;
  absl::StatusOr<bool> Next(std::vector<float>* features,
                            std::vector<int32_t>* labels,
                            std::vector<float>* teacher) override;
  int64_t frames_per_pass() const override { return source_->num_frames(); }

  const kaldi::KaldiDataSource& source() const { return *source_; }

 private:
  explicit KaldiUtteranceStream(std::unique_ptr<kaldi::KaldiDataSource> s)
      : source_(std::move(s)) {}
  std::unique_ptr<kaldi::KaldiDataSource> source_;
  kaldi::KaldiUtterance utt_;
};

struct LoadedKaldiData {
  std::unique_ptr<Utterances> utterances;  // feats.scp order
  int32_t num_classes = 0;
  int64_t frames_total = 0;  // alignment_frames() (all parts)
  kaldi::BadDataCounts bad;
  // The largest |feature| as read and as loaded (after CMVN): how far the
  // data stays from max_feature_magnitude.
  float max_abs_feature_read = 0;
  float max_abs_feature = 0;
};

// Part `part` of `num_parts` of `in`, loaded whole. ResourceExhausted,
// saying how much it needs, when its frames would take more than
// `max_bytes` (ExampleBytesPerFrame each); checked before anything is read.
absl::StatusOr<LoadedKaldiData> LoadKaldiUtterances(const KaldiInput& in,
                                                    int part, int num_parts,
                                                    int64_t max_bytes);

// A worker's data from Kaldi data directories, as the training loops take
// it (see PrepareKaldiWorkerData).
struct KaldiWorkerData {
  // Training: with the shared pool, the whole training set in memory
  // (`train` over `train_utts`); otherwise this worker's part streamed
  // (`open_source`; `train` then only gives the examples' shape).
  std::unique_ptr<Utterances> train_utts;
  std::unique_ptr<ExampleSet> train;
  OpenBatchSource open_source;
  // The held-out set in memory; null without one.
  std::unique_ptr<Utterances> heldout_utts;
  std::unique_ptr<ExampleSet> heldout;
  int feature_dim = 0;
  int32_t num_classes = 0;
  int64_t part_frames = 0;  // labelled frames this worker trains on per epoch
  int64_t all_frames = 0;   // of every worker (alignment_frames())
  std::string summary;      // one line for the log
};

// Prepares worker `index` of `num_workers`: indexes its part of `train`
// (with `shared_pool`, loads all of it), judging every utterance against
// the model's feature dimension (spec.feature_dim; an utterance of another
// one is bad data, skipped or refused by the policy, whichever it is),
// checks that the data's class count is the model's and that its features
// are (FailedPrecondition naming both otherwise), and loads `heldout` (data_dir
// empty: none; its class count is the training data's). Within the budget of
// `train` (see the top): ResourceExhausted when the pool's training set or the
// held-out set does not fit. Streamed sources (open_source) share the index
// made here for their first pass and re-index for later ones (a warm start).
absl::StatusOr<KaldiWorkerData> PrepareKaldiWorkerData(
    const KaldiInput& train, const KaldiInput& heldout, const ModelSpec& spec,
    const DataOptions& data, int index, int num_workers, bool shared_pool);

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_KALDI_DATA_H_
