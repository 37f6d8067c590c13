#include "worker/consensus_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

ABSL_FLAG(int, consensus_every, 4,
          "easgd, admm: minibatches of local SGD between two communications "
          "with the servers' consensus model (tau).");
ABSL_FLAG(double, elastic_alpha, 0,
          "easgd: the elastic coefficient in (0, 1]: at each communication "
          "the worker and the consensus move toward each other by alpha "
          "times their difference. 0: 0.9 / --num_workers.");
ABSL_FLAG(double, admm_rho, 0.1,
          "admm: the penalty rho (> 0) of the augmented Lagrangian: how "
          "strongly a worker's model is pulled toward the consensus between "
          "communications (each local step adds rho * (x - z) to the "
          "gradient; keep rho * learning rate well below 1). The servers "
          "must keep one ADMM slot per worker (asgd_server "
          "--admm_slots=--num_workers); a worker's slot is its "
          "--worker_index.");

namespace asgd {

absl::Status ApplyConsensusFlags(absl::string_view mode, int num_workers,
                                 ConsensusOptions* options) {
  ASGD_ASSIGN_OR_RETURN(options->rule, ParseConsensusMode(mode));
  options->every = absl::GetFlag(FLAGS_consensus_every);
  if (options->every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--consensus_every must be >= 1, got ", options->every));
  }
  const double alpha = absl::GetFlag(FLAGS_elastic_alpha);
  if (!(alpha >= 0 && alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--elastic_alpha must be in (0, 1] (0: 0.9 / --num_workers), got ",
        alpha));
  }
  options->alpha = static_cast<float>(alpha > 0 ? alpha : 0.9 / num_workers);
  const double rho = absl::GetFlag(FLAGS_admm_rho);
  if (!(rho > 0 && rho < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admm_rho must be > 0 (and < 1e6), got ", rho));
  }
  options->rho = static_cast<float>(rho);
  return absl::OkStatus();
}

}  // namespace asgd
