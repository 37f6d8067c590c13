// asgd_worker's held-out Kaldi data flags (defined once, in
// kaldi_train_flags.cc), next to the shared input flags of kaldi_flags.h:
//   --kaldi_heldout_data, --kaldi_heldout_alignments
#ifndef ASGD_WORKER_KALDI_TRAIN_FLAGS_H_
#define ASGD_WORKER_KALDI_TRAIN_FLAGS_H_

#include "absl/status/status.h"
#include "worker/data/kaldi_data.h"

namespace asgd {

// The training input (KaldiInputFromFlags, alignments required; the first
// worker computes and writes a missing --kaldi_global_cmvn file, the others
// compute it) and the held-out input (the same settings over
// --kaldi_heldout_data; data_dir empty when not given). InvalidArgument
// for held-out data without alignments.
absl::Status KaldiTrainingInputsFromFlags(bool first_worker,
                                          KaldiInput* train,
                                          KaldiInput* heldout);

}  // namespace asgd

#endif  // ASGD_WORKER_KALDI_TRAIN_FLAGS_H_
