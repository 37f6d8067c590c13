// Checkpoints of one server process's slice of the model.
//
// A checkpoint holds a StoreSnapshot (weights, optimizer state, version) and
// what it belongs to (the layout fingerprint, which covers the tensors, the
// pool shape and the model's identity, so that a checkpoint of a relu model
// is not restored into a sigmoid one; the server index and pool size).
// File: <dir>/server-<index>-of-<num_servers>.ckpt
//   char[8]  "ASGDCKP1"
//   uint32   header length, then header text:
//              fingerprint <hex>\nserver <index> <num_servers>\n
//              version <v>\nweights <n>\nstate <m>\n
//   float32  weights[n], state[m]            (little-endian)
//   uint64   FNV-1a 64 checksum of every byte before it
// Writing is atomic: a temporary file in the same directory, fsync, rename,
// fsync of the directory; a crash leaves the previous checkpoint intact. The
// generation before is kept as <file>.prev (a hard link made before the
// rename), so a bad checkpoint can be rolled back by hand. Non-finite
// weights or state are never written.
// Reading verifies everything before returning anything: a corrupt,
// truncated or mismatched file, or one holding non-finite values, is refused
// with a message saying why, and nothing is half-loaded.
//
// Thread-safety: reentrant; one writer per file (one server process).
#ifndef ASGD_SERVER_CHECKPOINT_H_
#define ASGD_SERVER_CHECKPOINT_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_layout.h"
#include "server/param_store.h"

namespace asgd {

std::string CheckpointPath(const std::string& dir, int server_index,
                           int num_servers);
// Where the generation before the current checkpoint is kept.
std::string PreviousCheckpointPath(const std::string& dir, int server_index,
                                   int num_servers);

// Makes `dir` usable for checkpoints: creates it (and its parents) when
// missing. FailedPrecondition when it exists but is not a directory, or
// cannot be created.
absl::Status PrepareCheckpointDir(const std::string& dir);

// FailedPrecondition (nothing written, the previous checkpoint kept) when
// the snapshot holds non-finite values; Unavailable when the file system
// fails.
absl::Status WriteCheckpoint(const std::string& dir, const ModelLayout& layout,
                             int server_index, const StoreSnapshot& snapshot);

// The checkpoint of this server in `dir`, or nullopt when there is none.
// DataLoss for a corrupt or truncated file or one holding non-finite values;
// FailedPrecondition for one of another model (the layout fingerprint
// covers the tensors and the model's identity, e.g. its spec), pool or
// server, or with(out) optimizer state that this server's optimizer does
// not (does) need, or when its path is not a regular file.
absl::StatusOr<std::optional<StoreSnapshot>> ReadCheckpoint(
    const std::string& dir, const ModelLayout& layout, int server_index,
    bool needs_state);

}  // namespace asgd

#endif  // ASGD_SERVER_CHECKPOINT_H_
