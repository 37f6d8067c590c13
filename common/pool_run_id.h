// The run id of the shared minibatch pool (proto FetchBatchesRequest.run_id):
// a secret that the workers of one training run share and no one else
// knows. The pool on server 0 keeps a separate dataset per run id, so a
// client without it can neither take a run's batches nor use them up.
//
// A run id is 16 to 256 bytes; anything shorter is refused as guessable.
// asgd_worker reads it from a file (--pool_run_id_file) so that it appears on
// no command line; one way to make one per run:
//
//   umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > run_id
//
// Thread-safety: reentrant functions.
#ifndef ASGD_COMMON_POOL_RUN_ID_H_
#define ASGD_COMMON_POOL_RUN_ID_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd {

inline constexpr size_t kMinPoolRunIdBytes = 16;
inline constexpr size_t kMaxPoolRunIdBytes = 256;

// OK when `run_id` has an acceptable length; else InvalidArgument saying
// what is wanted (the message never contains the run id).
absl::Status ValidatePoolRunId(absl::string_view run_id);

// The run id in the file at `path`, without surrounding whitespace.
// InvalidArgument (naming the path and `flag`) when the file cannot be read
// or its run id is not acceptable.
absl::StatusOr<std::string> ReadPoolRunIdFile(const std::string& path,
                                              absl::string_view flag);

}  // namespace asgd

#endif  // ASGD_COMMON_POOL_RUN_ID_H_
