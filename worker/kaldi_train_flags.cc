#include "worker/kaldi_train_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "worker/kaldi_flags.h"

ABSL_FLAG(std::string, kaldi_heldout_data, "",
          "With --kaldi_data: a Kaldi data directory of held-out utterances "
          "(loaded into memory) for the evaluations; none: no evaluation.");
ABSL_FLAG(std::string, kaldi_heldout_alignments, "",
          "Pdf-id alignments of --kaldi_heldout_data (files and globs).");

namespace asgd {

absl::Status KaldiTrainingInputsFromFlags(bool first_worker,
                                          KaldiInput* train,
                                          KaldiInput* heldout) {
  auto input = KaldiInputFromFlags(
      /*need_alignments=*/true, first_worker ? MissingGlobalCmvn::kComputeAndWrite
                                             : MissingGlobalCmvn::kCompute);
  if (!input.ok()) return input.status();
  *train = *input;
  *heldout = *train;
  heldout->data_dir = absl::GetFlag(FLAGS_kaldi_heldout_data);
  heldout->alignments = absl::GetFlag(FLAGS_kaldi_heldout_alignments);
  if (!heldout->data_dir.empty() && heldout->alignments.empty()) {
    return absl::InvalidArgumentError(
        "--kaldi_heldout_data needs --kaldi_heldout_alignments");
  }
  return absl::OkStatus();
}

}  // namespace asgd
