// The input flags shared by asgd_worker, asgd_eval and asgd_forward
// (defined once, in kaldi_flags.cc): the Kaldi data flags
//   --kaldi_data, --kaldi_alignments, --kaldi_cmvn, --kaldi_norm_vars,
//   --kaldi_global_cmvn, --kaldi_num_classes, --kaldi_memory_mb,
//   --kaldi_temp_dir
// and the checks that apply to Kaldi data and to a --corpus alike
//   --bad_data, --max_feature_magnitude
// and the reporter of utterances skipped as bad data (the log and the
// asgd_worker_bad_data_skipped_total metric).
#ifndef ASGD_WORKER_KALDI_FLAGS_H_
#define ASGD_WORKER_KALDI_FLAGS_H_

#include <array>
#include <functional>
#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "corpus/corpus_io.h"
#include "kaldi/bad_data.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "worker/data/kaldi_data.h"

namespace asgd {

// --kaldi_data ("" when not given).
std::string KaldiDataFlag();

// --bad_data; InvalidArgument naming the flag for a bad value.
absl::StatusOr<kaldi::BadDataPolicy> BadDataPolicyFromFlags();
// --max_feature_magnitude; InvalidArgument naming the flag unless > 0.
absl::StatusOr<float> MaxFeatureMagnitudeFromFlags();
// How a --corpus is read: --bad_data and --max_feature_magnitude (on_skip
// left for the caller to set).
absl::StatusOr<corpus::CorpusReadOptions> CorpusReadOptionsFromFlags();

// What a missing --kaldi_global_cmvn FILE means.
enum class MissingGlobalCmvn {
  kError,             // NotFound (asgd_eval, asgd_forward)
  kCompute,           // computed from --kaldi_data (workers but the first)
  kComputeAndWrite,   // computed and written (worker 0)
};

// The input the flags describe: data_dir = --kaldi_data, alignments =
// --kaldi_alignments (required when `need_alignments`), the global CMVN
// statistics of --kaldi_global_cmvn. InvalidArgument, naming the flag, for
// a bad value; the errors of reading or writing the statistics.
absl::StatusOr<KaldiInput> KaldiInputFromFlags(bool need_alignments,
                                               MissingGlobalCmvn missing);

// Utterances skipped as bad data (--bad_data=skip): each one's message
// (which names the utterance, the file and the byte offset) is logged, up
// to `max_lines` of them, and counted by reason, also in the counter
// asgd_worker_bad_data_skipped_total{worker, reason} when a registry is
// given (every reason's series built at construction).
//
// Thread-safety: thread-safe.
class BadDataReporter {
 public:
  BadDataReporter(std::ostream* log, std::string prefix,
                  prometheus::Registry* registry, int worker_index,
                  int max_lines = 20);

  void Report(const absl::Status& status);
  // A callback for KaldiInput::on_skip; the reporter must outlive it.
  std::function<void(const absl::Status&)> Callback() {
    return [this](const absl::Status& s) { Report(s); };
  }
  kaldi::BadDataCounts counts() const;

 private:
  std::ostream* const log_;
  const std::string prefix_;
  const int max_lines_;
  std::array<prometheus::Counter*, kaldi::kNumBadDataReasons> counters_{};
  mutable absl::Mutex mu_;
  kaldi::BadDataCounts counts_ ABSL_GUARDED_BY(mu_);
  int lines_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_KALDI_FLAGS_H_
