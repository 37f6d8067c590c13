// KaldiDataSource's teacher posteriors (KaldiDataOptions::teacher_scp):
// indexing the teacher scp into the part's records, and reading and
// checking one utterance's matrix.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kaldi/bad_data.h"
#include "kaldi/data_source.h"
#include "kaldi/data_source_record.h"
#include "kaldi/scp.h"

namespace asgd::kaldi {

absl::Status KaldiDataSource::ReadTeacherScp() {
  ScpOptions scp_options;
  scp_options.base_dir = options_.scp_base_dir;
  ASGD_ASSIGN_OR_RETURN(auto scp,
                        ScpReader::Open(options_.teacher_scp, scp_options));
  ScpEntry e;
  while (true) {
    absl::StatusOr<bool> more = scp->Next(&e);
    if (!more.ok()) {
      // A line that does not parse may be any part's: refused, or skipped
      // without a record.
      if (!IsBadData(more.status())) return more.status();
      ASGD_RETURN_IF_ERROR(Reject(nullptr, more.status()));
      continue;
    }
    if (!*more) break;
    const auto it = by_key_.find(e.key);
    if (it == by_key_.end()) continue;  // another part's, or not in feats.scp
    Record& r = records_[it->second];
    if (r.teacher.path >= 0) {
      ASGD_RETURN_IF_ERROR(Reject(
          &r, BadDataError(BadDataReason::kDuplicateKey,
                           {scp->path(), e.line_offset, e.line, e.key},
                           "the key appears again in the teacher scp")));
      continue;
    }
    r.teacher = Intern(e.rx);
  }
  for (Record& r : records_) {
    if (r.bad != BadDataReason::kNone || r.teacher.path >= 0) continue;
    ASGD_RETURN_IF_ERROR(Reject(
        &r, BadDataError(BadDataReason::kMissingTeacher,
                         FeatsLocation(r),
                         absl::StrCat("feats.scp line ", r.scp_line,
                                      ": no teacher posteriors in ",
                                      options_.teacher_scp))));
  }
  return absl::OkStatus();
}

absl::Status KaldiDataSource::LoadTeacher(const Record& r,
                                          KaldiUtterance* out) {
  const Rxfilename rx = r.teacher.Rx(paths_);
  ASGD_RETURN_IF_ERROR(reader_.ReadMatrix(rx, r.key, &out->teacher));
  const DataLocation where{rx.path, rx.offset, 0, r.key};
  const Matrix& t = out->teacher;
  if (t.rows != out->num_frames() || (t.rows > 0 && t.cols != num_classes_)) {
    return BadDataError(
        BadDataReason::kBadTeacher, where,
        absl::StrCat("teacher posteriors of ", t.rows, " x ", t.cols, " for ",
                     out->num_frames(), " frames of ", num_classes_,
                     " classes"));
  }
  for (int32_t f = 0; f < t.rows; ++f) {
    const float* row = t.data.data() + int64_t{f} * t.cols;
    double top = row[0];
    for (int32_t c = 0; c < t.cols; ++c) {
      if (!std::isfinite(row[c])) {
        return BadDataError(BadDataReason::kBadTeacher, where,
                            absl::StrCat("teacher frame ", f, " holds ",
                                         row[c]));
      }
      top = std::max<double>(top, row[c]);
    }
    double sum = 0;
    for (int32_t c = 0; c < t.cols; ++c) sum += std::exp(row[c] - top);
    const double lse = top + std::log(sum);
    if (!(std::fabs(lse) <= kTeacherRowTolerance)) {
      return BadDataError(
          BadDataReason::kBadTeacher, where,
          absl::StrCat("teacher frame ", f, " is not a log-distribution (log "
                       "sum exp ", lse, "): give log-posteriors (asgd_forward "
                       "--log_posteriors), not log-likelihoods"));
    }
  }
  return absl::OkStatus();
}

}  // namespace asgd::kaldi
