#include "kaldi/priors.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kaldi/alignments.h"

namespace asgd::kaldi {

absl::StatusOr<PdfCounts> CountPdfs(const std::vector<std::string>& files,
                                    int32_t num_classes, BadDataPolicy policy,
                                    const ReadLimits& limits) {
  if (num_classes < 0) {
    return absl::InvalidArgumentError("num_classes must be >= 0");
  }
  // With num_classes = 0 the counts grow to the largest label, bounded by
  // the same guard as the data source's class count.
  constexpr int32_t kMaxClasses = 1 << 20;
  const int32_t limit = num_classes > 0 ? num_classes : kMaxClasses;
  ASGD_ASSIGN_OR_RETURN(auto reader, AlignmentReader::Open(files, limits));
  PdfCounts out;
  out.counts.assign(num_classes, 0);
  AlignmentEntry e;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&e);
    if (!more.ok()) {
      if (!IsBadData(more.status()) || policy == BadDataPolicy::kRefuse) {
        return more.status();
      }
      out.bad.Add(BadDataReasonOf(more.status()));
      continue;
    }
    if (!*more) break;
    bool bad = false;
    for (size_t t = 0; t < e.labels.size(); ++t) {
      const int32_t l = e.labels[t];
      if (l >= 0 && l < limit) continue;
      const absl::Status s =
          BadDataError(BadDataReason::kLabelOutOfRange, e.where,
                       absl::StrCat("label ", l, " at frame ", t,
                                    " is outside [0, ", limit, ")"));
      if (policy == BadDataPolicy::kRefuse) return s;
      out.bad.Add(BadDataReason::kLabelOutOfRange);
      bad = true;
      break;
    }
    if (bad) continue;
    for (int32_t l : e.labels) {
      if (l >= static_cast<int32_t>(out.counts.size()))
        out.counts.resize(l + 1);
      ++out.counts[l];
    }
    ++out.utterances;
    out.frames += static_cast<int64_t>(e.labels.size());
  }
  return out;
}

std::vector<float> PriorsFromCounts(const std::vector<int64_t>& counts) {
  double total = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  std::vector<float> priors(counts.size(), 0.0f);
  if (total <= 0) return priors;
  for (size_t i = 0; i < counts.size(); ++i) {
    priors[i] = static_cast<float>(counts[i] / total);
  }
  return priors;
}

std::vector<float> LogPriors(const std::vector<float>& priors, float floor) {
  const float huge = std::sqrt(std::numeric_limits<float>::max());
  std::vector<float> out(priors.size());
  for (size_t i = 0; i < priors.size(); ++i) {
    out[i] = priors[i] < floor ? huge : std::log(priors[i]);
  }
  return out;
}

void SubtractLogPriors(const std::vector<float>& log_priors,
                       Matrix* log_posteriors) {
  for (int32_t r = 0; r < log_posteriors->rows; ++r) {
    float* row = log_posteriors->row(r);
    for (size_t p = 0; p < log_priors.size(); ++p) row[p] -= log_priors[p];
  }
}

}  // namespace asgd::kaldi
