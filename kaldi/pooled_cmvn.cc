#include "kaldi/pooled_cmvn.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kaldi/archive_reader.h"
#include "kaldi/cmvn.h"
#include "kaldi/scp.h"

namespace asgd::kaldi {

absl::StatusOr<DoubleMatrix> PooledCmvnStats(
    const std::string& data_dir, const ReadLimits& limits,
    const std::string& scp_base_dir, BadDataPolicy policy,
    std::vector<absl::Status>* left_out) {
  const std::string path = absl::StrCat(data_dir, "/cmvn.scp");
  ScpOptions scp_options;
  scp_options.base_dir = scp_base_dir;
  ASGD_ASSIGN_OR_RETURN(auto scp, ScpReader::Open(path, scp_options));
  RxfilenameReader reader(/*max_open_files=*/4, limits);
  std::vector<DoubleMatrix> speakers;
  std::string first_speaker;
  // Bad data about the entry on the scp's current line, under the policy.
  auto reject = [&](const ScpEntry& e, const absl::Status& s) {
    const absl::Status named =
        BadDataError(BadDataReasonOf(s), {path, e.line_offset, e.line},
                     absl::StrCat("speaker ", e.key, ": ", s.message()));
    if (policy == BadDataPolicy::kRefuse) return named;
    if (left_out != nullptr) left_out->push_back(named);
    return absl::OkStatus();
  };
  ScpEntry e;
  while (true) {
    absl::StatusOr<bool> more = scp->Next(&e);
    if (!more.ok()) {
      if (!IsBadData(more.status()) || policy == BadDataPolicy::kRefuse) {
        return more.status();
      }
      if (left_out != nullptr) left_out->push_back(more.status());
      continue;
    }
    if (!*more) break;
    DoubleMatrix stats;
    absl::Status s = reader.ReadMatrix(e.rx, "", &stats);
    if (!s.ok() && !IsBadData(s)) {
      return absl::Status(
          s.code(), absl::StrCat(path, " line ", e.line, " (speaker ", e.key,
                                 "): ", s.message()));
    }
    if (s.ok()) {
      // The shape, the count and finiteness, as a transform needs them.
      s = MakeCmvnTransform(stats, /*norm_vars=*/false,
                            {e.rx.path, e.rx.offset})
              .status();
    }
    if (s.ok() && !speakers.empty() && stats.cols != speakers[0].cols) {
      s = BadDataError(
          BadDataReason::kBadCmvn, {e.rx.path, e.rx.offset},
          absl::StrCat("statistics of dimension ", stats.cols - 1, ", speaker ",
                       first_speaker, "'s are of ", speakers[0].cols - 1));
    }
    if (!s.ok()) {
      ASGD_RETURN_IF_ERROR(reject(e, s));
      continue;
    }
    if (speakers.empty()) first_speaker = e.key;
    speakers.push_back(std::move(stats));
  }
  return PoolSpeakerCmvnStats(speakers, {path});
}

}  // namespace asgd::kaldi
