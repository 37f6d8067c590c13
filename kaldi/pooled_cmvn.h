// The global CMVN statistics of a Kaldi data directory: every speaker's
// statistics (cmvn.scp) pooled after each one's own mean is removed.
//
// Thread-safety: a plain function; it opens its own readers.
#ifndef ASGD_KALDI_POOLED_CMVN_H_
#define ASGD_KALDI_POOLED_CMVN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kaldi/bad_data.h"
#include "kaldi/matrix.h"
#include "kaldi/object_reader.h"

namespace asgd::kaldi {

// The statistics of every speaker in `data_dir`/cmvn.scp pooled after each
// one's own mean is removed (PoolSpeakerCmvnStats): with them as
// KaldiDataOptions::global_cmvn after per-speaker means, the directory's
// features have unit variance overall.
//
// A speaker whose statistics are bad data (unreadable, not 2 × (D+1) or of
// another dimension than the first speaker's, a frame count below 1, NaN),
// or a malformed cmvn.scp line: with kRefuse the error (kBadCmvn or the
// reader's reason, at cmvn.scp's line, naming the speaker and where the
// statistics are); with kSkip the speaker is left out of the pool and the
// error appended to *left_out (when not null). A KaldiDataSource over the
// same directory then skips that speaker's utterances, each counted under
// kBadCmvn. No usable speaker at all is kBadCmvn under either policy; a
// file that cannot be read is an I/O error naming cmvn.scp's line.
absl::StatusOr<DoubleMatrix> PooledCmvnStats(
    const std::string& data_dir, const ReadLimits& limits = {},
    const std::string& scp_base_dir = "",
    BadDataPolicy policy = BadDataPolicy::kRefuse,
    std::vector<absl::Status>* left_out = nullptr);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_POOLED_CMVN_H_
