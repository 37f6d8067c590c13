// KaldiDataSource: the utterances of a Kaldi data directory with their frame
// labels, for one worker's part, read through the scp offsets with bounded
// memory and shuffled in a bounded buffer.
//
// Input:
//   <data_dir>/feats.scp   `utt rxfilename` (scp.h: archives with offsets,
//                          ranges; FM, DM, CM, CM2, CM3 or text matrices)
//   <data_dir>/utt2spk     optional: `utt spk`
//   <data_dir>/cmvn.scp    optional: `spk rxfilename` of 2 × (D+1) stats
//                          (cmvn.h); keyed by utterance when there is no
//                          utt2spk, as apply-cmvn does
//   alignments             pdf-id int32-vector archives (alignments.h);
//                          none with features_only (decoding)
//
// Output: per utterance its key, features [T × D] float (CMVN applied) and
// labels [T] int32 in [0, num_classes).
//
// Parts: the utterance on the i-th non-blank line of feats.scp (i from 0)
// belongs to part i % num_parts. Every worker reads feats.scp and all
// alignment files (each worker judges only its own utterances), so all
// workers agree on feature_dim() and num_classes().
//
// Memory, for a part of U utterances with F frames in all:
//   * an index of about 120 bytes + the key per utterance;
//   * the labels: 4·F bytes in memory up to max_label_memory_bytes, beyond
//     that in an unlinked temporary file in temp_dir (label_store.h);
//   * CMVN transforms: 8·D bytes per speaker of the part;
//   * at most max_open_files archives open, each with a 64 KiB buffer;
//   * the shuffle buffer: at most shuffle_buffer_utterances utterances and
//     shuffle_buffer_bytes bytes (one utterance larger than that alone),
//     plus the utterance being read and the one handed out.
// Features are never held beyond that, so a corpus larger than memory works.
//
// Order: each pass (StartEpoch) reads the part's utterances in an order
// drawn from (seed, epoch, part): blocks of `read_block` consecutive scp
// entries (1: every utterance on its own; larger blocks read archives more
// sequentially) in a random permutation, then through a shuffle buffer from
// which a uniformly random utterance leaves each time it is full. With
// shuffle = false the order is feats.scp's and nothing is buffered
// (evaluation, writing log-likelihoods).
//
// Bad data (bad_data.h): problems found while indexing (malformed scp line,
// duplicate key, missing alignment, label out of range, missing speaker or
// bad CMVN stats, a bad alignment entry) are reported by Create(); problems
// found while reading features (truncated archive, unknown token, offset
// past the end, NaN/Inf, a feature beyond max_feature_magnitude as read or
// after CMVN, dimension or length mismatch, bad range) by Next().
// With BadDataPolicy::kRefuse the first one is the error (and Next() keeps
// returning it until StartEpoch()); with kSkip the utterance is dropped for
// good and counted once in bad_data(). I/O errors (a missing archive, a
// read error) and kUnimplemented rxfilenames (pipes) are errors under
// either policy.
//
// Example (a worker's training loop and an evaluation pass):
//   KaldiDataOptions o;
//   o.data_dir = "data/train";
//   o.alignments = "exp/tri3_ali/pdf.*.gz";
//   o.part = worker_index;
//   o.num_parts = num_workers;
//   o.policy = BadDataPolicy::kSkip;
//   ASGD_ASSIGN_OR_RETURN(auto source, KaldiDataSource::Create(o));
//   // model input: source->feature_dim(), output: source->num_classes()
//   KaldiUtterance utt;
//   for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
//     source->StartEpoch(epoch);
//     while (true) {
//       ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&utt));
//       if (!more) break;
//       // utt.features (utt.num_frames() × feature_dim), utt.labels
//     }
//     log(source->bad_data().ToString());
//   }
//
// Thread-safety: not thread-safe; one thread drives a source (run several
// sources, e.g. train and held-out, in different threads if needed).
#ifndef ASGD_KALDI_DATA_SOURCE_H_
#define ASGD_KALDI_DATA_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kaldi/archive_reader.h"
#include "kaldi/bad_data.h"
#include "kaldi/cmvn.h"
#include "kaldi/label_store.h"
#include "kaldi/matrix.h"
#include "kaldi/object_reader.h"
#include "kaldi/scp.h"

namespace asgd::kaldi {

enum class CmvnMode {
  kAuto,     // apply cmvn.scp when the data directory has one
  kOff,      // never
  kRequire,  // apply; a directory without cmvn.scp is an error
};

struct KaldiDataOptions {
  std::string data_dir;    // required
  // Required unless features_only: files and globs (ExpandFileList).
  std::string alignments;
  // Features without labels (writing log-likelihoods of data that has no
  // alignments): `alignments` must be empty; utterances come with no
  // labels, num_classes() is 0, and num_frames() and alignment_frames()
  // are 0 (frame counts are known only once read).
  bool features_only = false;
  int part = 0;
  int num_parts = 1;

  // 0: the largest label of all alignments + 1. Otherwise labels must be
  // below it.
  int32_t num_classes = 0;
  // Labels at or above this are out of range in any case (guards the
  // scanned class count against a corrupt label).
  int32_t max_num_classes = 1 << 20;
  // The features per frame every utterance must have (e.g. the model's
  // input), or 0: the most common column count among the first 16 readable
  // utterances of feats.scp (the first seen of those tied), so that one
  // utterance of another dimension, the first one included, is bad data
  // kDimMismatch rather than the measure of the others. Given, and none of
  // those utterances has it: Create() fails with kFailedPrecondition (data
  // of another kind, not one bad utterance).
  int32_t feature_dim = 0;

  CmvnMode cmvn = CmvnMode::kAuto;
  bool norm_vars = false;
  // Global statistics (2 × (D+1), e.g. PooledCmvnStats of the training
  // directory, pooled_cmvn.h) applied after the per-speaker CMVN, means and
  // variances, as `apply-cmvn --norm-vars=true global.stats` would; empty:
  // none.
  DoubleMatrix global_cmvn;

  // A feature with |value| above this, as read (after decompression) or
  // after CMVN (per speaker, then global), is bad data kFeatureMagnitude;
  // > 0, +inf for no bound (NaN and Inf are kNonFinite in any case).
  float max_feature_magnitude = kDefaultMaxFeatureMagnitude;

  BadDataPolicy policy = BadDataPolicy::kRefuse;
  // Under kSkip, called with the error of each bad record when it is
  // dropped (from Create() or Next(), on the calling thread), e.g. to log
  // it or count it in a metric; may be empty.
  std::function<void(const absl::Status&)> on_skip;

  bool shuffle = true;
  uint64_t seed = 1;
  int32_t read_block = 1;
  int32_t shuffle_buffer_utterances = 64;
  int64_t shuffle_buffer_bytes = int64_t{64} << 20;

  // Teacher-student training from an archive: an scp of per-utterance
  // teacher log-posteriors (frames × classes float matrices, e.g. asgd_forward
  // --log_posteriors --out_scp of a larger model). Every utterance of the
  // part needs one (else bad data kMissingTeacher), of its frames × the
  // class count, finite, each row a log-distribution (log sum exp within
  // kTeacherRowTolerance of 0; else kBadTeacher). Not with features_only.
  std::string teacher_scp;

  int max_open_files = 16;
  int64_t max_label_memory_bytes = int64_t{256} << 20;
  std::string temp_dir = "/tmp";
  ReadLimits limits;
  // base_dir for relative rxfilenames ("": the current directory).
  std::string scp_base_dir;
};

// How far a teacher row's log sum exp may be from 0 (rows written as float
// log-posteriors are within 1e-5).
inline constexpr float kTeacherRowTolerance = 1e-3f;

struct KaldiUtterance {
  std::string key;
  Matrix features;              // num_frames × feature_dim
  std::vector<int32_t> labels;  // num_frames
  // With teacher_scp: num_frames × num_classes log-posteriors; else empty.
  Matrix teacher;
  int32_t num_frames() const { return features.rows; }
  // Bytes of the data it holds (what the shuffle buffer counts).
  int64_t bytes() const {
    return static_cast<int64_t>(
        (features.data.size() + teacher.data.size()) * sizeof(float) +
        labels.size() * sizeof(int32_t) + key.size());
  }
};

struct KaldiDataStats {
  int64_t utterances_read = 0;  // handed out by Next(), all passes
  int64_t frames_read = 0;
  int64_t buffer_utterances = 0;  // now in the shuffle buffer
  int64_t buffer_bytes = 0;
  int64_t peak_buffer_utterances = 0;
  int64_t peak_buffer_bytes = 0;
  int open_files = 0;
  int64_t file_opens = 0;
  int64_t label_memory_bytes = 0;
  bool labels_spilled = false;
  // The largest |feature| of the utterances read without error, as read
  // (decompressed) and as handed out (after CMVN): how far honest data stays
  // from max_feature_magnitude.
  float max_abs_feature_read = 0;
  float max_abs_feature = 0;
};

struct StoredRx;  // data_source_record.h

class KaldiDataSource {
 public:
  // Indexes the part: reads feats.scp, utt2spk, cmvn.scp (and the stats of
  // the part's speakers) and every alignment file, and determines
  // feature_dim and num_classes. Errors: InvalidArgument for bad options;
  // bad data under kRefuse (see above); I/O errors.
  static absl::StatusOr<std::unique_ptr<KaldiDataSource>> Create(
      const KaldiDataOptions& options);
  ~KaldiDataSource();

  int32_t feature_dim() const { return feature_dim_; }
  int32_t num_classes() const { return num_classes_; }
  // The part's utterances not (yet) known to be bad, and their frames (by
  // their alignments).
  int64_t num_utterances() const { return live_utterances_; }
  int64_t num_frames() const { return live_frames_; }
  // Labels of every alignment read without error, all parts together (and
  // alignments of utterances that feats.scp lacks): the same number on every
  // worker, e.g. to size the step count of lockstep training.
  int64_t alignment_frames() const { return alignment_frames_; }
  // Whether per-speaker CMVN is applied; whether global statistics are.
  bool cmvn_applied() const { return !transforms_.empty(); }
  bool global_cmvn_applied() const { return global_.dim() > 0; }
  // Whether utterances come with teacher posteriors (teacher_scp).
  bool has_teacher() const { return !options_.teacher_scp.empty(); }

  // Starts pass `epoch` (see Order above), dropping what is left of the
  // current one.
  void StartEpoch(uint64_t epoch);

  // The next utterance of the pass into `out` (its previous contents are
  // replaced); false at the end of the pass. Before the first StartEpoch()
  // the source is in pass 0.
  absl::StatusOr<bool> Next(KaldiUtterance* out);

  const BadDataCounts& bad_data() const { return bad_; }
  KaldiDataStats stats() const;

 private:
  struct Record;
  explicit KaldiDataSource(const KaldiDataOptions& options);

  absl::Status Index();
  absl::Status ReadScp(std::vector<ScpEntry>* first_entries);
  absl::Status ReadSpeakers();
  absl::Status ReadCmvn();
  absl::Status ReadAlignments();
  absl::Status FindFeatureDim(const std::vector<ScpEntry>& first_entries);
  // data_source_teacher.cc: the teacher scp's entries into the records
  // (while by_key_ is there); one utterance's teacher posteriors, checked.
  absl::Status ReadTeacherScp();
  absl::Status LoadTeacher(const Record& record, KaldiUtterance* out);
  // Applies the policy to a bad-data status about `record` (may be null:
  // a line that has no record).
  absl::Status Reject(Record* record, const absl::Status& status);
  absl::Status Load(const Record& record, KaldiUtterance* out);
  // `rx` with its path interned in paths_ (while indexing).
  StoredRx Intern(const Rxfilename& rx);
  // Where a record's features are, for its bad-data errors.
  DataLocation FeatsLocation(const Record& record) const;

  KaldiDataOptions options_;
  std::vector<std::string> paths_;  // archive paths, interned
  std::vector<Record> records_;
  absl::flat_hash_map<std::string, int64_t> by_key_;
  // paths_ by name, while indexing (Intern).
  absl::flat_hash_map<std::string, int32_t> path_index_;
  std::vector<std::string> speakers_;      // interned speaker ids
  std::vector<CmvnTransform> transforms_;  // per speaker, when applied
  CmvnTransform global_;                   // dim 0: none
  std::vector<std::string> alignment_files_;
  std::unique_ptr<LabelStore> labels_;
  RxfilenameReader reader_;
  int32_t feature_dim_ = 0;
  std::string dim_origin_;  // where feature_dim_ comes from, for messages
  int32_t num_classes_ = 0;
  int64_t live_utterances_ = 0;
  int64_t live_frames_ = 0;
  int64_t alignment_frames_ = 0;
  BadDataCounts bad_;

  // The current pass.
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
  std::mt19937_64 rng_;
  std::vector<KaldiUtterance> buffer_;
  int64_t buffer_bytes_ = 0;
  bool has_pending_ = false;
  KaldiUtterance pending_;
  absl::Status pass_error_;
  KaldiDataStats stats_;
};

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_DATA_SOURCE_H_
