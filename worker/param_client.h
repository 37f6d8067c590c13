// ParamClient: how a worker talks to the parameter-server pool, as a small
// interface so training code and tests do not depend on gRPC
// (GrpcParamClient is the real one).
//
// The model is one flat float vector in ModelLayout order; the client splits
// pushes and assembles pulls across the pool's servers. Versions are per
// server: versions[i] is server i's version.
//
// Thread-safety: implementations are used by one thread at a time.
#ifndef ASGD_WORKER_PARAM_CLIENT_H_
#define ASGD_WORKER_PARAM_CLIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_layout.h"

namespace asgd {

struct PushOutcome {
  int applied = 0;              // servers that applied their part
  int dropped = 0;              // servers that dropped it as too stale
  uint64_t max_staleness = 0;   // largest staleness any server reported
  bool pull_required = false;   // pull before the next push
};

class ParamClient {
 public:
  virtual ~ParamClient() = default;

  virtual const ModelLayout& layout() const = 0;
  // Model attributes served by the pool (e.g. "activation").
  virtual const std::map<std::string, std::string>& attributes() const = 0;

  // Fetches the whole model into `params` (layout().total_size() floats) and
  // each server's version into `versions`.
  virtual absl::Status Pull(absl::Span<float> params,
                            std::vector<uint64_t>* versions) = 0;

  // Sends `gradient` (the average over `num_minibatches` minibatches),
  // computed from the model of `versions`, to every server.
  virtual absl::StatusOr<PushOutcome> Push(
      absl::Span<const float> gradient, const std::vector<uint64_t>& versions,
      int num_minibatches) = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PARAM_CLIENT_H_
