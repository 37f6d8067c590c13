// asgd_forward --active_pdfs: lazy output evaluation of a Kaldi data
// directory. Per utterance, the pdfs a decoder asks for at each frame come
// from Kaldi posterior archives (the ids of each frame's pairs; the weights
// are not used), e.g. a lattice's:
//   lattice-to-post --acoustic-scale=0.1 "ark:gunzip -c lat.1.gz|" ark:- |
//     post-to-pdf-post final.mdl ark:- ark:active.1.ark
// Each utterance is scored by a LazyScorer (worker/lazy_scorer.h) and
// written as a posterior archive of (pdf, score) pairs in the lists' order:
// the score is the pdf's logit, minus its log prior when priors are given,
// i.e. the log-posterior (or pseudo-log-likelihood) plus one constant per
// frame.
//
// Bad input (a list that cannot be read, an utterance without a list, a
// list of another length than the utterance, a pdf past the model's
// classes) is refused, or skipped and reported under BadDataPolicy::kSkip.
//
// Thread-safety: one call at a time.
#ifndef ASGD_WORKER_LAZY_FORWARD_H_
#define ASGD_WORKER_LAZY_FORWARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kaldi/archive_writer.h"
#include "kaldi/bad_data.h"
#include "kaldi/data_source.h"
#include "model/lazy_output.h"
#include "model/model_spec.h"
#include "worker/kaldi_flags.h"
#include "worker/lazy_scorer.h"

namespace asgd {

// Active pdfs in all (over every utterance) that ReadActiveLists holds:
// 4 bytes each.
inline constexpr int64_t kMaxActiveEntries = int64_t{1} << 28;

// The per-frame id lists of the posterior archives `files`, by utterance.
// A bad archive entry or a key read twice is refused (InvalidArgument), or
// reported to `bad` and left out under kSkip; ResourceExhausted past
// kMaxActiveEntries; the readers' I/O errors.
absl::StatusOr<absl::flat_hash_map<std::string, ActiveOutputs>>
ReadActiveLists(const std::vector<std::string>& files,
                kaldi::BadDataPolicy policy, BadDataReporter* bad);

struct LazyForwardResult {
  int64_t utterances = 0;        // written
  int64_t lists_unused = 0;      // lists of utterances not in the data
  LazyScorerStats stats;
};

// Scores every utterance of `source` against `lists` and writes them to
// `writer` (which the caller closes). `log_priors`: empty, or one per class.
absl::StatusOr<LazyForwardResult> RunLazyForward(
    const ModelSpec& spec, absl::Span<const float> params,
    absl::Span<const float> log_priors,
    const absl::flat_hash_map<std::string, ActiveOutputs>& lists,
    const LazyScorerOptions& options, kaldi::BadDataPolicy policy,
    kaldi::KaldiDataSource* source, kaldi::ArchiveWriter* writer,
    BadDataReporter* bad);

// One line for the log: frames, the share of pdfs active, the output
// layer's time per frame lazily and (with compare_full) in full.
std::string DescribeLazyForward(const LazyForwardResult& result, int classes,
                                int batch_rows);

}  // namespace asgd

#endif  // ASGD_WORKER_LAZY_FORWARD_H_
