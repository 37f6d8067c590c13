// The server's refusal reaches the worker as a code and a Refusal, through
// the real gRPC client: a push refused because this address has its pushes
// in flight is "busy", whatever the message says.
#include <vector>

#include "absl/time/clock.h"
#include "common/refusal.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "worker/data/toy_task.h"
#include "worker/ps/grpc_param_client.h"

namespace asgd {
namespace {

TEST(GrpcParamClientTest, TheServersRefusalArrivesAsARefusal) {
  const ModelSpec spec = ToyModel("dnn");
  ParamStoreOptions o;
  SetModel(spec, &o);
  o.num_shards = 1;
  GrpcServiceOptions service;
  service.max_pushes_per_peer = 1;
  auto server = GrpcServer::Start(o, InitialParams(spec, 1), "127.0.0.1", 0,
                                  nullptr, {}, nullptr, service);
  ASSERT_TRUE(server.ok()) << server.status();
  // Another stream from this address holds the only slot.
  auto stub = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
      (*server)->local_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto holder = stub->PushStream(&ctx);
  asgd::v1::PushChunk header;
  header.mutable_header()->set_num_minibatches(1);
  ASSERT_TRUE(holder->Write(header));
  auto client = GrpcParamClient::Create({(*server)->local_address()}, {});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->max_push_minibatches(), 64);
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  // Wait (bounded) until the server has admitted the holder's stream.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*server)->service()->pushes_in_flight() < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
  }
  ASSERT_EQ((*server)->service()->pushes_in_flight(), 1);
  const absl::StatusOr<PushOutcome> pushed =
      (*client)->Push(std::vector<float>(params.size(), 0.1f), versions, 1);
  ASSERT_FALSE(pushed.ok());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(RefusalOf(pushed.status()), Refusal::kPeerLimit) << pushed.status();
  ctx.TryCancel();
  holder->Finish();
}

}  // namespace
}  // namespace asgd
