// Checkpoints of one server process's slice of the model.
//
// A checkpoint holds a StoreSnapshot (weights, optimizer state, version) and
// what it belongs to (the layout fingerprint, server index and pool size).
// File: <dir>/server-<index>-of-<num_servers>.ckpt
//   char[8]  "ASGDCKP1"
//   uint32   header length, then header text:
//              fingerprint <hex>\nserver <index> <num_servers>\n
//              version <v>\nweights <n>\nstate <m>\n
//   float32  weights[n], state[m]            (little-endian)
//   uint64   FNV-1a 64 checksum of every byte before it
// Writing is atomic: a temporary file in the same directory, fsync, rename,
// fsync of the directory; a crash leaves the previous checkpoint intact.
// Reading verifies everything before returning anything: a corrupt,
// truncated or mismatched file is refused with a message saying why, and
// nothing is half-loaded.
//
// Thread-safety: reentrant; one writer per file (one server process).
#ifndef ASGD_SERVER_CHECKPOINT_H_
#define ASGD_SERVER_CHECKPOINT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_layout.h"
#include "server/param_store.h"

namespace asgd {

std::string CheckpointPath(const std::string& dir, int server_index,
                           int num_servers);

absl::Status WriteCheckpoint(const std::string& dir, const ModelLayout& layout,
                             int server_index, const StoreSnapshot& snapshot);

// The checkpoint of this server in `dir`, or nullopt when there is none.
// DataLoss for a corrupt or truncated file; FailedPrecondition for one of
// another model, pool or server, or with(out) optimizer state that this
// server's optimizer does not (does) need.
absl::StatusOr<std::optional<StoreSnapshot>> ReadCheckpoint(
    const std::string& dir, const ModelLayout& layout, int server_index,
    bool needs_state);

}  // namespace asgd

#endif  // ASGD_SERVER_CHECKPOINT_H_
