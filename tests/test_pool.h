// A pool of in-process parameter servers on 127.0.0.1, free ports, for the
// end-to-end tests: `num_servers` servers of the model `spec`, plain SGD
// at `learning_rate` (also published as the "learning_rate" attribute),
// initial weights from seed 1; `admm_slots` ADMM slots on each server.
#ifndef ASGD_TESTS_TEST_POOL_H_
#define ASGD_TESTS_TEST_POOL_H_

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "model/model_spec.h"
#include "server/grpc_server.h"
#include "server/model_options.h"

namespace asgd {

struct TestPool {
  std::vector<std::unique_ptr<GrpcServer>> servers;
  std::vector<std::string> addresses;  // by server index
};

inline absl::StatusOr<TestPool> StartTestPool(const ModelSpec& spec,
                                              int num_servers, int num_shards,
                                              float learning_rate,
                                              int admm_slots = 0) {
  TestPool pool;
  for (int s = 0; s < num_servers; ++s) {
    ParamStoreOptions o;
    SetModel(spec, &o);
    o.server_index = s;
    o.num_servers = num_servers;
    o.num_shards = num_shards;
    o.optimizer.learning_rate = learning_rate;
    o.admm_slots = admm_slots;
    o.attributes["learning_rate"] = absl::StrCat(learning_rate);
    auto server = GrpcServer::Start(o, InitialParams(spec, 1), "127.0.0.1", 0);
    if (!server.ok()) return server.status();
    pool.addresses.push_back((*server)->local_address());
    pool.servers.push_back(*std::move(server));
  }
  return pool;
}

// The whole model as `servers` hold it, in layout order (call with no push
// in flight for a consistent one).
inline std::vector<float> PoolModel(
    const std::vector<std::unique_ptr<GrpcServer>>& servers) {
  std::vector<float> model;
  for (const auto& server : servers) {
    const std::vector<float> part = server->store()->Snapshot();
    model.insert(model.end(), part.begin(), part.end());
  }
  return model;
}

// A test gradient with values of both signs and varied magnitudes.
inline std::vector<float> SineGradient(int64_t n, float scale) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i] = scale * std::sin(0.37f * static_cast<float>(i) + scale);
  }
  return g;
}

}  // namespace asgd

#endif  // ASGD_TESTS_TEST_POOL_H_
