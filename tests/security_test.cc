// Transport security end to end: real servers on port 0 with TLS, mutual TLS
// and a bearer token, against real clients (GrpcParamClient, raw stubs over
// MakeChannel, the health probe). Certificates are made at test time by
// tests/security_make_certs.sh (the openssl command) in TEST_TMPDIR.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chunking.h"
#include "model/model_spec.h"
#include "common/grpc_security.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "server/health_probe.h"
#include "worker/ps/grpc_param_client.h"

namespace asgd {
namespace {

using asgd::v1::PushChunk;
using asgd::v1::PushReply;
using ::testing::HasSubstr;

constexpr int64_t kChunkElements = 64;
constexpr char kToken[] = "s3cret-token-0123456789abcdef";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// The certificates, made once per test binary.
const std::string& CertDir() {
  static const std::string* const dir = [] {
    auto* d = new std::string(TempDir() + "/certs");
    const std::string command =
        absl::StrCat("tests/security_make_certs.sh '", *d, "'");
    const int rc = std::system(command.c_str());
    if (rc != 0) {
      ADD_FAILURE() << command << " failed (" << rc
                    << "); it needs the openssl command (Debian package "
                       "openssl, listed by scripts/install_deps.sh)";
    }
    return d;
  }();
  return *dir;
}

std::string Cert(const std::string& name) { return CertDir() + "/" + name; }

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

SecurityOptions ServerTls() {
  SecurityOptions o;
  o.tls_cert = Cert("server.pem");
  o.tls_key = Cert("server.key");
  return o;
}

SecurityOptions ServerMutualTls() {
  SecurityOptions o = ServerTls();
  o.tls_ca = Cert("ca.pem");
  o.require_client_cert = true;
  return o;
}

SecurityOptions ClientTls() {
  SecurityOptions o;
  o.tls_ca = Cert("ca.pem");
  return o;
}

SecurityOptions WithToken(SecurityOptions o, const std::string& token) {
  o.token = token;
  return o;
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(10));
  return ctx;
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(CertDir().empty()); }

  void StartServer(const SecurityOptions& security) {
    ModelSpec spec;
    spec.feature_dim = 20;
    spec.context = 0;
    spec.layers = {LayerSpec::Dense(16, Activation::kRelu)};
    spec.num_classes = 5;
    ParamStoreOptions o;
    SetModel(spec, &o);
    o.num_servers = 1;
    o.server_index = 0;
    o.num_shards = 2;
    o.optimizer.learning_rate = 0.5f;
    o.max_chunk_elements = kChunkElements;
    auto server = GrpcServer::Start(o, InitialParams(spec, 1), "127.0.0.1",
                                    0, nullptr, security);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  ParamStore* store() { return server_->store(); }
  std::string address() { return server_->local_address(); }

  std::unique_ptr<asgd::v1::ParameterServer::Stub> Stub(
      const SecurityOptions& client) {
    auto channel = MakeChannel(address(), client, grpc::ChannelArguments());
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return nullptr;
    return asgd::v1::ParameterServer::NewStub(*channel);
  }

  static grpc::Status Describe(asgd::v1::ParameterServer::Stub* stub) {
    grpc::ClientContext ctx;
    asgd::v1::ModelDescription d;
    return stub->DescribeModel(WithDeadline(&ctx), {}, &d);
  }

  // One pull on a PullStream of its own; `chunks` counts the chunks that
  // arrived.
  static grpc::Status Pull(asgd::v1::ParameterServer::Stub* stub,
                           int* chunks = nullptr) {
    grpc::ClientContext ctx;
    auto reader = stub->PullStream(WithDeadline(&ctx));
    reader->Write(asgd::v1::PullRequest());
    reader->WritesDone();
    asgd::v1::PullChunk chunk;
    int n = 0;
    while (reader->Read(&chunk)) n += chunk.end_of_pull() ? 0 : 1;
    if (chunks != nullptr) *chunks = n;
    return reader->Finish();
  }

  // One push on a PushStream of its own: its reply, the stream's status.
  static grpc::Status Send(asgd::v1::ParameterServer::Stub* stub,
                           const std::vector<PushChunk>& msgs,
                           PushReply* reply) {
    grpc::ClientContext ctx;
    auto writer = stub->PushStream(WithDeadline(&ctx));
    for (const PushChunk& m : msgs) {
      if (!writer->Write(m)) break;  // the server already ended the stream
    }
    writer->WritesDone();
    writer->Read(reply);
    return writer->Finish();
  }

  // A valid push of `value` everywhere at version 0.
  std::vector<PushChunk> ValidPush(float value) {
    std::vector<PushChunk> msgs;
    PushChunk header;
    header.mutable_header()->set_worker_id(7);
    header.mutable_header()->set_num_minibatches(1);
    msgs.push_back(header);
    const auto plan =
        PlanChunks(store()->layout(), store()->range(), kChunkElements);
    for (const ChunkRef& c : plan) {
      PushChunk m;
      m.mutable_chunk()->set_tensor(store()->layout().tensors()[c.tensor].name);
      m.mutable_chunk()->set_offset(c.offset);
      std::vector<float> values(c.count, value);
      AppendFloats(values.data(), c.count, m.mutable_chunk()->mutable_data());
      msgs.push_back(m);
    }
    PushChunk commit;
    commit.mutable_commit()->set_num_chunks(plan.size());
    msgs.push_back(commit);
    return msgs;
  }

  // DescribeModel, Pull and a Push all succeed, and the push is applied.
  void ExpectFullAccess(asgd::v1::ParameterServer::Stub* stub) {
    ASSERT_NE(stub, nullptr);
    grpc::Status s = Describe(stub);
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    int chunks = 0;
    s = Pull(stub, &chunks);
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_GT(chunks, 0);
    const uint64_t version = store()->version();
    PushReply reply;
    s = Send(stub, ValidPush(0.25f), &reply);
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_EQ(reply.result(), PushReply::APPLIED);
    EXPECT_EQ(store()->version(), version + 1);
  }

  // Every ParameterServer method fails with UNAUTHENTICATED and `message`,
  // and nothing changes.
  void ExpectUnauthenticated(asgd::v1::ParameterServer::Stub* stub,
                             const std::string& message) {
    ASSERT_NE(stub, nullptr);
    const std::vector<float> before = store()->Snapshot();
    const uint64_t version = store()->version();
    grpc::Status s = Describe(stub);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "Describe";
    EXPECT_THAT(s.error_message(), HasSubstr(message));
    int chunks = -1;
    s = Pull(stub, &chunks);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "Pull";
    EXPECT_THAT(s.error_message(), HasSubstr(message));
    EXPECT_EQ(chunks, 0);
    PushReply reply;
    s = Send(stub, ValidPush(0.25f), &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "Push";
    EXPECT_THAT(s.error_message(), HasSubstr(message));
    {
      grpc::ClientContext ctx;
      asgd::v1::FetchBatchesRequest request;
      request.set_run_id("security-test-run-id-0123456789");
      request.set_num_frames(1000);
      request.set_batch_size(10);
      request.set_epochs(1);
      request.set_count(1);
      asgd::v1::FetchBatchesReply batches;
      s = stub->FetchBatches(WithDeadline(&ctx), request, &batches);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << "FetchBatches";
    }
    EXPECT_EQ(store()->Snapshot(), before);
    EXPECT_EQ(store()->version(), version);
  }

  std::unique_ptr<GrpcServer> server_;
};

// --- TLS and mutual TLS ---------------------------------------------------

TEST_F(SecurityTest, TlsRoundTripWithTheWorkerClient) {
  StartServer(ServerTls());
  PoolClientOptions options;
  options.security = ClientTls();
  options.connect_timeout = absl::Seconds(10);
  auto client = GrpcParamClient::Create({address()}, options);  // DescribeModel
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  EXPECT_EQ(params, store()->Snapshot());
  std::vector<float> gradient(params.size(), 0.25f);
  auto pushed = (*client)->Push(gradient, versions, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied, 1);
  EXPECT_EQ(store()->version(), 1u);
  const std::vector<float> after = store()->Snapshot();
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], params[i] - 0.5f * 0.25f);
  }
}

TEST_F(SecurityTest, TlsRoundTripWithTheExpectedNameSet) {
  StartServer(ServerTls());
  SecurityOptions client = ClientTls();
  client.tls_server_name = "localhost";
  ExpectFullAccess(Stub(client).get());
}

TEST_F(SecurityTest, ClientTrustingAnotherCaIsRefused) {
  StartServer(ServerTls());
  SecurityOptions client;
  client.tls_ca = Cert("other_ca.pem");
  grpc::Status s = Describe(Stub(client).get());
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(SecurityTest, WrongExpectedServerNameIsRefused) {
  StartServer(ServerTls());
  SecurityOptions client = ClientTls();
  client.tls_server_name = "someone-else.example";
  EXPECT_FALSE(Describe(Stub(client).get()).ok());
}

TEST_F(SecurityTest, PlaintextClientOfATlsServerIsRefused) {
  StartServer(ServerTls());
  EXPECT_FALSE(Describe(Stub(SecurityOptions()).get()).ok());
}

TEST_F(SecurityTest, MutualTlsRefusesAClientWithoutCertificate) {
  StartServer(ServerMutualTls());
  grpc::Status s = Describe(Stub(ClientTls()).get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << s.error_message();
  EXPECT_NE(s.error_message().find("client certificate"), std::string::npos);
}

TEST_F(SecurityTest, MutualTlsRefusesACertificateFromAnotherCa) {
  StartServer(ServerMutualTls());
  SecurityOptions client = ClientTls();
  client.tls_cert = Cert("other_client.pem");
  client.tls_key = Cert("other_client.key");
  EXPECT_FALSE(Describe(Stub(client).get()).ok());
}

TEST_F(SecurityTest, MutualTlsWithAClientCertificateWorks) {
  StartServer(ServerMutualTls());
  SecurityOptions client = ClientTls();
  client.tls_cert = Cert("client.pem");
  client.tls_key = Cert("client.key");
  ExpectFullAccess(Stub(client).get());
}

// --- The token, with and without TLS ---------------------------------------

class TokenTest : public SecurityTest,
                  public ::testing::WithParamInterface<bool> {
 protected:
  bool tls() const { return GetParam(); }
  void StartTokenServer() {
    StartServer(WithToken(tls() ? ServerTls() : SecurityOptions(), kToken));
  }
  // Without TLS the client must be told that cleartext is intended.
  SecurityOptions Client(const std::string& token) const {
    SecurityOptions o =
        WithToken(tls() ? ClientTls() : SecurityOptions(), token);
    o.allow_cleartext_token = !tls();
    return o;
  }
};

TEST_P(TokenTest, RightTokenWorks) {
  StartTokenServer();
  ExpectFullAccess(Stub(Client(kToken)).get());
}

TEST_P(TokenTest, WrongTokenIsUnauthenticatedAndChangesNothing) {
  StartTokenServer();
  ExpectUnauthenticated(Stub(Client("wrong-token")).get(),
                        "invalid bearer token");
  // A prefix of the right token, and the right token with a suffix.
  ExpectUnauthenticated(Stub(Client("s3cret")).get(), "invalid bearer token");
  ExpectUnauthenticated(Stub(Client(absl::StrCat(kToken, "x"))).get(),
                        "invalid bearer token");
}

TEST_P(TokenTest, MissingTokenIsUnauthenticatedAndChangesNothing) {
  StartTokenServer();
  ExpectUnauthenticated(Stub(Client("")).get(), "missing");
}

TEST_P(TokenTest, HandWrittenHeadersAreCheckedExactly) {
  StartTokenServer();
  auto stub = Stub(Client(""));
  for (const std::string& value :
       {std::string(kToken), absl::StrCat("bearer ", kToken),
        absl::StrCat("Bearer  ", kToken), absl::StrCat("Basic ", kToken)}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", value);
    asgd::v1::ModelDescription d;
    EXPECT_EQ(stub->DescribeModel(WithDeadline(&ctx), {}, &d).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << value;
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  asgd::v1::ModelDescription d;
  EXPECT_TRUE(stub->DescribeModel(WithDeadline(&ctx), {}, &d).ok());
}

// Calls `method` with an empty message through a generic stub.
grpc::Status GenericCall(const std::shared_ptr<grpc::Channel>& channel,
                         const std::string& method) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(WithDeadline(&ctx), method, grpc::StubOptions(), &request,
                 &response, [&done](grpc::Status s) { done.set_value(s); });
  return done.get_future().get();
}

TEST_P(TokenTest, EveryMethodButHealthNeedsTheToken) {
  StartTokenServer();
  auto channel = MakeChannel(address(), Client(""), grpc::ChannelArguments());
  ASSERT_TRUE(channel.ok()) << channel.status();
  for (const char* method :
       {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/asgd.v1.ParameterServer/NoSuchMethod", "/no.such.Service/Method",
        "/grpc.health.v1.Health/NoSuchMethod"}) {
    EXPECT_EQ(GenericCall(*channel, method).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << method;
  }
  EXPECT_TRUE(GenericCall(*channel, "/grpc.health.v1.Health/Check").ok());
}

TEST_P(TokenTest, TheWorkerClientSendsTheToken) {
  StartTokenServer();
  PoolClientOptions options;
  options.security = Client(kToken);
  options.connect_timeout = absl::Seconds(10);
  auto client = GrpcParamClient::Create({address()}, options);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  auto pushed =
      (*client)->Push(std::vector<float>(params.size(), 0.25f), versions, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied, 1);
}

TEST_P(TokenTest, HealthCheckNeedsNoToken) {
  StartTokenServer();
  absl::Status s =
      ProbeHealth(address(), absl::Seconds(10), Client(/*token=*/""));
  EXPECT_TRUE(s.ok()) << s;
  s = ProbeHealth(address(), absl::Seconds(10), Client(kToken));
  EXPECT_TRUE(s.ok()) << s;
}

TEST_P(TokenTest, OversizeMessageIsRefusedAndChangesNothing) {
  StartTokenServer();
  auto stub = Stub(Client(kToken));
  const std::vector<float> before = store()->Snapshot();
  std::vector<PushChunk> msgs = ValidPush(0.25f);
  msgs[1].mutable_chunk()->mutable_data()->assign(5 << 20, '\0');  // 5 MiB
  PushReply reply;
  grpc::Status s = Send(stub.get(), msgs, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_EQ(store()->Snapshot(), before);
  EXPECT_EQ(store()->version(), 0u);
  // The server is still fine.
  ExpectFullAccess(stub.get());
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutTls, TokenTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Tls" : "Plaintext";
                         });

TEST_F(SecurityTest, HealthProbeOverMutualTls) {
  StartServer(WithToken(ServerMutualTls(), kToken));
  // The server's own certificate also serves as a client certificate.
  SecurityOptions probe = ClientTls();
  probe.tls_cert = Cert("server.pem");
  probe.tls_key = Cert("server.key");
  probe.tls_server_name = "localhost";
  absl::Status s = ProbeHealth(address(), absl::Seconds(10), probe);
  EXPECT_TRUE(s.ok()) << s;
  // Health checks need no client certificate (nor the token)...
  s = ProbeHealth(address(), absl::Seconds(10), ClientTls());
  EXPECT_TRUE(s.ok()) << s;
  // ...but the parameter server does.
  EXPECT_EQ(Describe(Stub(ClientTls()).get()).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// --- Files and settings --------------------------------------------------

void ExpectInvalid(const absl::Status& s, const std::string& substring) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(substring));
}

TEST(SecurityFilesTest, UnreadableFilesNameTheFile) {
  const std::string missing = TempDir() + "/no-such-file.pem";
  const std::string empty = WriteFile("empty.pem", "  \n");
  const std::string not_pem = WriteFile("not.pem", "hello\n");

  SecurityOptions server = ServerTls();
  server.tls_cert = missing;
  ExpectInvalid(MakeServerCredentials(server).status(), missing);
  server = ServerTls();
  server.tls_key = empty;
  ExpectInvalid(MakeServerCredentials(server).status(), empty);
  server = ServerMutualTls();
  server.tls_ca = not_pem;
  ExpectInvalid(MakeServerCredentials(server).status(), not_pem);

  SecurityOptions client = ClientTls();
  client.tls_ca = missing;
  ExpectInvalid(MakeChannelCredentials(client).status(), missing);
  ExpectInvalid(MakeChannel("127.0.0.1:1", client, {}).status(), missing);
  ExpectInvalid(ProbeHealth("127.0.0.1:1", absl::Seconds(1), client), missing);
  client = ClientTls();
  client.tls_cert = Cert("client.pem");
  client.tls_key = missing;
  ExpectInvalid(MakeChannelCredentials(client).status(), missing);

  ExpectInvalid(ReadTokenFile(missing).status(), missing);
  ExpectInvalid(ReadTokenFile(empty).status(), empty);

  // GrpcServer::Start passes the error on.
  server = ServerTls();
  server.tls_cert = missing;
  auto started = GrpcServer::Start(ParamStoreOptions(), {}, "127.0.0.1", 0,
                                   nullptr, server);
  ExpectInvalid(started.status(), missing);
}

TEST(SecurityFilesTest, InconsistentSettingsAreRefused) {
  SecurityOptions o;
  o.tls_key = Cert("server.key");
  ExpectInvalid(MakeServerCredentials(o).status(), "--tls_cert");
  o = ServerTls();
  o.tls_key.clear();
  ExpectInvalid(MakeServerCredentials(o).status(), "--tls_key");
  o = ServerTls();
  o.require_client_cert = true;
  ExpectInvalid(MakeServerCredentials(o).status(), "--tls_ca");
  o = SecurityOptions();
  o.require_client_cert = true;
  ExpectInvalid(MakeServerCredentials(o).status(), "--tls_cert");
  o = SecurityOptions();
  o.tls_ca = Cert("ca.pem");
  ExpectInvalid(MakeServerCredentials(o).status(), "--tls_cert");

  o = ClientTls();
  o.tls_cert = Cert("client.pem");
  ExpectInvalid(MakeChannelCredentials(o).status(), "--tls_key");
  o = SecurityOptions();
  o.tls_cert = Cert("client.pem");
  o.tls_key = Cert("client.key");
  ExpectInvalid(MakeChannelCredentials(o).status(), "--tls_ca");
  // Call credentials cannot carry a token without TLS; MakeChannel() can,
  // when cleartext is allowed.
  o = WithToken(SecurityOptions(), kToken);
  o.allow_cleartext_token = true;
  ExpectInvalid(MakeChannelCredentials(o).status(), "MakeChannel");
  EXPECT_TRUE(MakeChannel("127.0.0.1:1", o, {}).ok());
  // Token-only servers are allowed (trusted networks).
  EXPECT_TRUE(MakeServerCredentials(o).ok());
}

// A token without TLS would travel in clear text: a client refuses to send
// it unless told that is intended; the worker's client and the peer client
// build their channels the same way.
TEST(SecurityFilesTest, ATokenWithoutTlsIsRefusedUnlessCleartextIsAllowed) {
  SecurityOptions o = WithToken(SecurityOptions(), kToken);
  const absl::Status s = MakeChannel("127.0.0.1:1", o, {}).status();
  ExpectInvalid(s, "--allow_cleartext_token");
  ExpectInvalid(s, "--tls_ca");
  PoolClientOptions client;
  client.security = o;
  client.connect_timeout = absl::Seconds(1);
  EXPECT_EQ(GrpcParamClient::Create({"127.0.0.1:1"}, client).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.allow_cleartext_token = true;
  EXPECT_TRUE(MakeChannel("127.0.0.1:1", o, {}).ok());
  // With TLS the flag changes nothing.
  SecurityOptions tls = WithToken(ClientTls(), kToken);
  EXPECT_TRUE(MakeChannel("127.0.0.1:1", tls, {}).ok());
}

TEST(SecurityFilesTest, TokenFileIsTrimmedAndChecked) {
  auto token = ReadTokenFile(WriteFile("token", "  abc-123_XYZ \n\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc-123_XYZ");
  const std::string binary = WriteFile("binary-token", "abc\x01\x02");
  ExpectInvalid(ReadTokenFile(binary).status(), binary);
  const std::string two_lines = WriteFile("two-line-token", "abc\ndef\n");
  ExpectInvalid(ReadTokenFile(two_lines).status(), two_lines);
}

}  // namespace
}  // namespace asgd
