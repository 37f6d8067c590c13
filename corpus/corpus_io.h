// The asgd corpus on disk, and its reader.
//
// A corpus is a directory:
//   corpus.txt          text metadata, one `key value...` per line:
//                         format asgd-corpus-1
//                         feature_dim 40
//                         num_classes N
//                         classes <name_0> <name_1> ... <name_{N-1}>
//                         mean <feature_dim floats>     (over all training frames)
//                         stddev <feature_dim floats>   (over all training frames)
//                         seed S
//                         train_files train-00.bin train-01.bin ...
//                         heldout_files heldout-00.bin ...
//   train-PP.bin        binary utterance files (little-endian), see below
//   heldout-PP.bin
//   train-PP.txt        one line per utterance: `<utt_id> <voice> <text>`
//   heldout-PP.txt
//
// Binary utterance file:
//   char[8]  magic "ASGDUTT1"
//   uint32   feature_dim
//   uint32   num_utterances
//   then per utterance:
//     uint32   num_frames
//     uint32   voice index
//     float32  features[num_frames * feature_dim]   (row-major, frame by frame;
//                                                    log-mel, per-utterance
//                                                    mean-normalised)
//     int32    labels[num_frames]                   (0 <= label < num_classes)
//
// Reading checks every feature as stored and as the worker sees it after
// the corpus's normalisation (FeatureNormaliser): NaN or Inf is bad data
// kNonFinite, |value| above CorpusReadOptions::max_feature_magnitude is
// kFeatureMagnitude (kaldi/bad_data.h: kInvalidArgument with the reason as
// payload, the message naming the file, the utterance's byte offset, its
// index in the file, the row and the column). Under BadDataPolicy::kSkip
// such an utterance is left out and counted instead (Corpus::bad); then
// the utterances no longer line up with the lines of the parts' .txt files.
// Everything else that is wrong is an error under either policy.
//
// Files are read only when they are regular files: a FIFO, a device or a
// directory is refused (kInvalidArgument) without being opened for reading.
//
// Thread-safety: the functions are reentrant; a loaded Corpus is immutable data.
#ifndef ASGD_CORPUS_CORPUS_IO_H_
#define ASGD_CORPUS_CORPUS_IO_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kaldi/bad_data.h"

namespace asgd::corpus {

struct Utterance {
  int voice = 0;
  int num_frames = 0;
  std::vector<float> features;  // num_frames * feature_dim
  std::vector<int32_t> labels;  // num_frames
};

struct CorpusInfo {
  int feature_dim = 0;
  int num_classes = 0;
  std::vector<std::string> class_names;  // num_classes
  std::vector<float> mean;               // feature_dim
  std::vector<float> stddev;             // feature_dim
  uint64_t seed = 0;
};

// The normalisation the worker applies to a corpus's features
// (worker/data/utterances.h): x' = (x - mean[d]) / stddev[d], a stddev at or
// below 1e-6 counting as 1.
class FeatureNormaliser {
 public:
  explicit FeatureNormaliser(const CorpusInfo& info);
  float operator()(int d, float x) const {
    return (x - mean_[d]) * inv_stddev_[d];
  }

 private:
  std::vector<float> mean_;        // feature_dim
  std::vector<float> inv_stddev_;  // feature_dim
};

struct CorpusReadOptions {
  // |feature| above this, as stored or normalised, is bad data
  // kFeatureMagnitude; > 0, +inf for no bound.
  float max_feature_magnitude = kaldi::kDefaultMaxFeatureMagnitude;
  kaldi::BadDataPolicy policy = kaldi::BadDataPolicy::kRefuse;
  // Under kSkip, called with the error of each utterance left out.
  std::function<void(const absl::Status&)> on_skip;
};

struct Corpus {
  CorpusInfo info;
  std::vector<Utterance> train;
  std::vector<Utterance> heldout;
  int64_t train_frames = 0;
  int64_t heldout_frames = 0;
  kaldi::BadDataCounts bad;  // utterances left out under kSkip
};

// Reads the whole corpus in `dir`. Returns NotFound when corpus.txt is missing
// and InvalidArgument (naming the file and what is wrong) for a malformed
// metadata file, a bad magic, a truncated file, an out-of-range label, a bad
// max_feature_magnitude, or (under kRefuse) bad features, as above.
absl::StatusOr<Corpus> LoadCorpus(const std::string& dir,
                                  const CorpusReadOptions& options = {});

// Writes one binary utterance file (the format above). `feature_dim` must
// match every utterance. Writes to a temporary name and renames.
absl::Status WriteUtteranceFile(const std::string& path, int feature_dim,
                                const std::vector<Utterance>& utterances);

// Reads one binary utterance file, checking it against `feature_dim` and
// `num_classes`, and its features as stored (not normalised) as above;
// utterances left out under kSkip are counted in *bad when not null.
absl::StatusOr<std::vector<Utterance>> ReadUtteranceFile(
    const std::string& path, int feature_dim, int num_classes,
    const CorpusReadOptions& options = {},
    kaldi::BadDataCounts* bad = nullptr);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_CORPUS_IO_H_
