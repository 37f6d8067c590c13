#include "server/health_probe.h"

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace asgd {

absl::Status ProbeHealth(const std::string& address, absl::Duration timeout,
                         const SecurityOptions& security) {
  // Health checks need no token: never send it (in clear text or not).
  SecurityOptions probe = security;
  probe.token.clear();
  auto channel = MakeChannel(address, probe, grpc::ChannelArguments());
  if (!channel.ok()) return channel.status();
  grpc::GenericStub stub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // HealthCheckRequest{service: ""} encodes to zero bytes; the reply
  // HealthCheckResponse{status: SERVING (1)} encodes to 0x08 0x01.
  grpc::ByteBuffer request, response;
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   cv.notify_one();
                 });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) {
    absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("health check of ", address,
                                               " failed: ", s.message()));
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::UnavailableError("unreadable health check reply");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes != std::string("\x08\x01", 2)) {
    return absl::UnavailableError(
        absl::StrCat("server at ", address, " is not SERVING"));
  }
  return absl::OkStatus();
}

}  // namespace asgd
