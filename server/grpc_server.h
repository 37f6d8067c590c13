// GrpcServer: a running parameter-server process in one object: ParamStore,
// its gRPC service, gRPC health checking and server reflection, listening on
// host:port (port 0 picks a free port; port() tells which).
//
//   auto server = GrpcServer::Start(options, initial_model, "127.0.0.1", 0);
//   ... connect to "127.0.0.1:" + (*server)->port() ...
//   (*server)->Shutdown();
//
// Used by asgd_server's main and by tests that need a real server in-process.
// Thread-safety: thread-safe; Shutdown() is idempotent and also run by the
// destructor.
#ifndef ASGD_SERVER_GRPC_SERVER_H_
#define ASGD_SERVER_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/grpc_security.h"
#include "grpcpp/server.h"
#include "server/grpc_service.h"
#include "server/param_store.h"

namespace asgd {

class GrpcServer {
 public:
  // `metrics` (may be null) must outlive the server; when set it also
  // observes the store.
  // `security` selects TLS / mutual TLS / a bearer token (default: none).
  // `restore` (may be null), a restored checkpoint, is loaded before the
  // server starts serving. `service` sets the push admission limits.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const ParamStoreOptions& options, absl::Span<const float> initial_model,
      const std::string& host, int port, ServerMetrics* metrics = nullptr,
      const SecurityOptions& security = {},
      const StoreSnapshot* restore = nullptr,
      const GrpcServiceOptions& service = {});
  ~GrpcServer();

  int port() const { return port_; }
  // "127.0.0.1:<port>" style address for clients on this machine.
  std::string local_address() const;
  ParamStore* store() { return store_.get(); }
  BatchPool* pool() { return &pool_; }
  GrpcParameterService* service() { return service_.get(); }

  // Stops accepting calls; in-flight calls get up to `grace` to finish. The
  // store keeps running (e.g. for a final checkpoint).
  void StopServing(absl::Duration grace = absl::Seconds(5));

  // StopServing(grace), then drains and joins the shard threads.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  GrpcServer() = default;

  std::unique_ptr<ParamStore> store_;
  BatchPool pool_;
  std::unique_ptr<GrpcParameterService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool stopped_serving_ = false;
  bool shut_down_ = false;
};

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_SERVER_H_
