#include "server/grpc_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace asgd {
namespace {
constexpr int kMaxMessageBytes = 4 << 20;
}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const ParamStoreOptions& options, absl::Span<const float> initial_model,
    const std::string& host, int port, ServerMetrics* metrics,
    const SecurityOptions& security, const StoreSnapshot* restore,
    const GrpcServiceOptions& service) {
  ASGD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                        MakeServerCredentials(security));
  auto server = std::unique_ptr<GrpcServer>(new GrpcServer());
  ParamStoreOptions store_options = options;
  if (metrics != nullptr) store_options.observer = metrics;
  ASGD_ASSIGN_OR_RETURN(server->store_,
                        ParamStore::Create(store_options, initial_model));
  if (restore != nullptr) ASGD_RETURN_IF_ERROR(server->store_->Restore(*restore));
  server->service_ = std::make_unique<GrpcParameterService>(
      server->store_.get(), &server->pool_, metrics, service);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(host, ":", port);
  builder.AddListeningPort(address, credentials, &server->port_);
  // Pushes arrive in chunks of at most 1 MiB; refuse anything much larger.
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // gRPC's own bounds; the service's admission (call_admission.h) does not
  // depend on them.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             service.max_streams_per_connection);
  grpc::ResourceQuota quota("asgd_server");
  quota.Resize(static_cast<size_t>(service.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
  builder.experimental().SetInterceptorCreators(MakeServerInterceptors(security));
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(absl::Seconds(1)); }

std::string GrpcServer::local_address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

void GrpcServer::StopServing(absl::Duration grace) {
  if (stopped_serving_) return;
  stopped_serving_ = true;
  // Idle streams end now, busy ones after their push or pull; then gRPC
  // waits for the calls in flight.
  if (service_) service_->BeginShutdown();
  if (server_) server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  StopServing(grace);
  if (store_) store_->Shutdown();
}

}  // namespace asgd
