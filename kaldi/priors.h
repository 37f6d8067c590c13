// Pdf priors for hybrid decoding: the counts of each pdf over the training
// alignments (as Kaldi's analyze-counts makes them), the priors (counts
// normalised), and pseudo-log-likelihoods = log posterior − log prior, the
// float-matrix archive latgen-faster-mapped decodes.
//
//   ASGD_ASSIGN_OR_RETURN(PdfCounts c, CountPdfs(files, num_classes, {}));
//   std::vector<float> log_priors = LogPriors(PriorsFromCounts(c.counts));
//   ...per utterance: log_posteriors (frames × pdfs) from the network
//   SubtractLogPriors(log_priors, &log_posteriors);
//   writer->WriteMatrix(key, log_posteriors);
//
// Thread-safety: the functions are reentrant.
#ifndef ASGD_KALDI_PRIORS_H_
#define ASGD_KALDI_PRIORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kaldi/bad_data.h"
#include "kaldi/matrix.h"
#include "kaldi/object_reader.h"

namespace asgd::kaldi {

struct PdfCounts {
  std::vector<int64_t> counts;  // per pdf
  int64_t utterances = 0;       // alignments counted
  int64_t frames = 0;
  BadDataCounts bad;  // alignments skipped (kSkip)
};

// Counts the labels of every alignment in `files` (alignments.h).
// num_classes = 0: the largest label + 1. A label < 0 or >= num_classes,
// or a bad archive entry, is an error under kRefuse; under kSkip that
// alignment is not counted (a bad entry ends its file, as always).
absl::StatusOr<PdfCounts> CountPdfs(const std::vector<std::string>& files,
                                    int32_t num_classes, BadDataPolicy policy,
                                    const ReadLimits& limits = {});

// counts / total (all zeros when the total is 0).
std::vector<float> PriorsFromCounts(const std::vector<int64_t>& counts);

// log(prior), and for a prior below `floor` (a pdf never seen in training)
// a large positive value, so that its pseudo-log-likelihood is hugely
// negative and the decoder avoids it (Kaldi nnet1's --prior-floor does the
// same).
std::vector<float> LogPriors(const std::vector<float>& priors,
                             float floor = 1e-10f);

// log_posteriors[t][p] -= log_priors[p] for every frame (cols must equal
// log_priors.size()).
void SubtractLogPriors(const std::vector<float>& log_priors,
                       Matrix* log_posteriors);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_PRIORS_H_
