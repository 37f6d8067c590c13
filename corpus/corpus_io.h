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
// Thread-safety: the functions are reentrant; a loaded Corpus is immutable data.
#ifndef ASGD_CORPUS_CORPUS_IO_H_
#define ASGD_CORPUS_CORPUS_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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

struct Corpus {
  CorpusInfo info;
  std::vector<Utterance> train;
  std::vector<Utterance> heldout;
  int64_t train_frames = 0;
  int64_t heldout_frames = 0;
};

// Reads the whole corpus in `dir`. Returns NotFound when corpus.txt is missing
// and InvalidArgument (naming the file and what is wrong) for a malformed
// metadata file, a bad magic, a truncated file or an out-of-range label.
absl::StatusOr<Corpus> LoadCorpus(const std::string& dir);

// Writes one binary utterance file (the format above). `feature_dim` must
// match every utterance. Writes to a temporary name and renames.
absl::Status WriteUtteranceFile(const std::string& path, int feature_dim,
                                const std::vector<Utterance>& utterances);

// Reads one binary utterance file, checking it against `feature_dim` and
// `num_classes`.
absl::StatusOr<std::vector<Utterance>> ReadUtteranceFile(
    const std::string& path, int feature_dim, int num_classes);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_CORPUS_IO_H_
