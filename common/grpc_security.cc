#include "common/grpc_security.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security.h"
#include "grpc/slice.h"
#include "grpc/support/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace asgd {
namespace {

constexpr absl::string_view kAuthorizationKey = "authorization";
constexpr absl::string_view kBearerPrefix = "Bearer ";

// Methods any caller may use without the token: container health probes
// (Docker exec probes, Kubernetes gRPC probes) hold no secret. They reveal
// only SERVING / NOT_SERVING.
constexpr absl::string_view kTokenExemptMethods[] = {
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
};

// --- Files -----------------------------------------------------------------

absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read ", what, " file \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("error reading ", what, " file \"", path, "\""));
  }
  return contents.str();
}

// A PEM file for `flag` ("--tls_cert", ...): must be readable and non-empty
// and look like PEM; gRPC's own errors about malformed PEM only reach the log.
absl::StatusOr<std::string> ReadPemFile(const std::string& path,
                                        absl::string_view flag) {
  auto contents = ReadWholeFile(path, flag);
  if (!contents.ok()) return contents.status();
  if (absl::StripAsciiWhitespace(*contents).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " file \"", path, "\" is empty"));
  }
  if (contents->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " file \"", path, "\" is not PEM (no \"-----BEGIN\" line)"));
  }
  return contents;
}

// --- Token check -----------------------------------------------------------

// Equality whose running time depends only on the length of `want`, not on
// where `got` first differs (the token's length is not secret).
bool ConstantTimeEquals(absl::string_view got, absl::string_view want) {
  const absl::string_view probe = got.size() == want.size() ? got : want;
  unsigned char diff = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(probe[i] ^ want[i]);
  }
  return diff == 0;
}

absl::string_view SliceView(const grpc_slice& slice) {
  return absl::string_view(
      reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
      GRPC_SLICE_LENGTH(slice));
}

// A grpc_auth_metadata_processor: gRPC's server auth filter calls Process()
// with a call's initial metadata (":path" included) before the call reaches
// the application; a non-OK status fails the call with that status and the
// handler never runs. It checks the bearer token (when one is set) and, with
// mutual TLS, that the peer presented a client certificate the TLS layer
// verified (the handshake verifies a presented certificate but lets a peer
// without one through, so that it gets UNAUTHENTICATED here rather than a
// failed connection). The state is immutable, so calls may run concurrently.
struct TokenCheck {
  std::string expected;  // "Bearer <token>"; empty: no token check
  bool require_client_cert = false;

  static void Process(void* state, grpc_auth_context* context,
                      const grpc_metadata* md, size_t num_md,
                      grpc_process_auth_metadata_done_cb done,
                      void* user_data) {
    const auto* self = static_cast<const TokenCheck*>(state);
    absl::string_view path;
    const grpc_metadata* authorization = nullptr;
    int num_authorization = 0;
    for (size_t i = 0; i < num_md; ++i) {
      const absl::string_view key = SliceView(md[i].key);
      if (key == ":path") {
        path = SliceView(md[i].value);
      } else if (key == kAuthorizationKey) {
        authorization = &md[i];
        ++num_authorization;
      }
    }
    for (absl::string_view exempt : kTokenExemptMethods) {
      if (path == exempt) {
        done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
        return;
      }
    }
    const char* error = nullptr;
    if (self->require_client_cert &&
        (context == nullptr || !grpc_auth_context_peer_is_authenticated(context))) {
      error = "a client certificate signed by the server's --tls_ca is required";
    } else if (self->expected.empty()) {
      // Certificate only: nothing else to check.
    } else if (num_authorization == 0) {
      error = "missing \"authorization: Bearer <token>\" metadata";
    } else if (num_authorization > 1) {
      error = "more than one \"authorization\" metadata entry";
    } else if (!ConstantTimeEquals(SliceView(authorization->value),
                                   self->expected)) {
      error = "invalid bearer token";
    }
    if (error != nullptr) {
      done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED,
           error);
      return;
    }
    // Consumed: handlers never see the token.
    done(user_data, self->expected.empty() ? nullptr : authorization,
         self->expected.empty() ? 0 : 1, nullptr, 0, GRPC_STATUS_OK, nullptr);
  }

  static void Destroy(void* state) { delete static_cast<TokenCheck*>(state); }
};

// --- Server credentials ----------------------------------------------------

struct ServerTlsConfig {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // empty: client certificates are not requested
  bool require_client_cert = false;
};

// grpc::ServerCredentials over gRPC core credentials (TLS or insecure) with
// an optional token check. gRPC 1.51's C++ InsecureServerCredentials() cannot
// carry an auth metadata processor, but core's insecure credentials can; this
// class binds ports with the core credentials directly.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  // `tls` null: insecure. `token` empty: no token check.
  CoreServerCredentials(const ServerTlsConfig* tls, const std::string& token) {
    // The base class has initialised gRPC by now.
    if (tls == nullptr) {
      creds_ = grpc_insecure_server_credentials_create();
    } else {
      grpc_ssl_pem_key_cert_pair pair = {tls->private_key.c_str(),
                                         tls->cert_chain.c_str()};
      creds_ = grpc_ssl_server_credentials_create_ex(
          tls->client_ca.empty() ? nullptr : tls->client_ca.c_str(), &pair, 1,
          tls->client_ca.empty()
              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
              : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY,
          nullptr);
    }
    const bool require_cert = tls != nullptr && tls->require_client_cert;
    if (!token.empty() || require_cert) {
      grpc_auth_metadata_processor processor;
      processor.process = &TokenCheck::Process;
      processor.destroy = &TokenCheck::Destroy;
      processor.state = new TokenCheck{
          token.empty() ? "" : absl::StrCat(kBearerPrefix, token), require_cert};
      grpc_server_credentials_set_auth_metadata_processor(creds_, processor);
    }
  }
  ~CoreServerCredentials() override { grpc_server_credentials_release(creds_); }

  CoreServerCredentials(const CoreServerCredentials&) = delete;
  CoreServerCredentials& operator=(const CoreServerCredentials&) = delete;

  // The token check is this class's only processor; replacing it would turn
  // the check off silently.
  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/)
      override {
    gpr_log(GPR_ERROR,
            "asgd: SetAuthMetadataProcessor on MakeServerCredentials() "
            "credentials is not supported");
    GPR_ASSERT(false);
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* creds_ = nullptr;
};

// --- Client ----------------------------------------------------------------

// Adds the token to every call; used over TLS (gRPC refuses to send it
// otherwise: the default minimum security level of call credentials is
// privacy and integrity).
class BearerTokenPlugin final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit BearerTokenPlugin(std::string header) : header_(std::move(header)) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "asgd.BearerToken"; }
  grpc::Status GetMetadata(
      grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
      const grpc::AuthContext& /*channel_auth_context*/,
      std::multimap<grpc::string, grpc::string>* metadata) override {
    metadata->emplace(std::string(kAuthorizationKey), header_);
    return grpc::Status::OK;
  }

 private:
  const std::string header_;
};

// Adds the token to every call's initial metadata; used without TLS.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header)
      : header_(header) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(std::string(kAuthorizationKey),
                                                 *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;  // owned by the factory (the channel's)
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string header)
      : header_(std::move(header)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(&header_);  // gRPC takes ownership
  }

 private:
  const std::string header_;
};

absl::Status CheckClientOptions(const SecurityOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        options.tls_cert.empty()
            ? "--tls_key is set but --tls_cert is not: a client certificate "
              "needs both"
            : "--tls_cert is set but --tls_key is not: a client certificate "
              "needs both");
  }
  if (!options.tls_cert.empty() && options.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert is set but --tls_ca is not: a client turns TLS on with "
        "--tls_ca (the CA that signed the server's certificate)");
  }
  return absl::OkStatus();
}

// TLS channel credentials (no token), for options with tls_ca set.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeTlsChannelCredentials(const SecurityOptions& options) {
  grpc::SslCredentialsOptions ssl;
  auto ca = ReadPemFile(options.tls_ca, "--tls_ca");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!options.tls_cert.empty()) {
    auto cert = ReadPemFile(options.tls_cert, "--tls_cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadPemFile(options.tls_key, "--tls_key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

std::shared_ptr<grpc::ChannelCredentials> WithToken(
    std::shared_ptr<grpc::ChannelCredentials> tls, const std::string& token) {
  if (token.empty()) return tls;
  return grpc::CompositeChannelCredentials(
      tls,
      grpc::MetadataCredentialsFromPlugin(std::make_unique<BearerTokenPlugin>(
          absl::StrCat(kBearerPrefix, token))));
}

}  // namespace

SecurityOptions WorkerServiceSecurity(const SecurityOptions& worker) {
  SecurityOptions s;
  s.token = worker.token;
  if (!worker.tls_cert.empty()) {
    s.tls_cert = worker.tls_cert;
    s.tls_key = worker.tls_key;
    s.require_client_cert = worker.require_client_cert;
    if (worker.require_client_cert) s.tls_ca = worker.tls_ca;
  }
  return s;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options) {
  if (!options.tls_key.empty() && options.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls_key is set but --tls_cert is not: TLS needs both");
  }
  if (options.tls_cert.empty()) {
    if (options.require_client_cert) {
      return absl::InvalidArgumentError(
          "--require_client_cert needs TLS: set --tls_cert and --tls_key");
    }
    if (!options.tls_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls_ca is set but --tls_cert is not: the server would run "
          "without TLS; set --tls_cert and --tls_key");
    }
    if (options.token.empty()) return grpc::InsecureServerCredentials();
    // Token-only: for trusted networks; see the header.
    return std::shared_ptr<grpc::ServerCredentials>(
        std::make_shared<CoreServerCredentials>(nullptr, options.token));
  }
  if (options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert is set but --tls_key is not: TLS needs both");
  }
  if (options.require_client_cert && options.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "--require_client_cert needs --tls_ca, the CA that signs client "
        "certificates");
  }
  ServerTlsConfig tls;
  auto cert = ReadPemFile(options.tls_cert, "--tls_cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadPemFile(options.tls_key, "--tls_key");
  if (!key.ok()) return key.status();
  tls.cert_chain = *std::move(cert);
  tls.private_key = *std::move(key);
  if (options.require_client_cert) {
    auto ca = ReadPemFile(options.tls_ca, "--tls_ca");
    if (!ca.ok()) return ca.status();
    tls.client_ca = *std::move(ca);
    tls.require_client_cert = true;
  }
  return std::shared_ptr<grpc::ServerCredentials>(
      std::make_shared<CoreServerCredentials>(&tls, options.token));
}

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptors(const SecurityOptions&) {
  return {};
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const SecurityOptions& options) {
  if (absl::Status s = CheckClientOptions(options); !s.ok()) return s;
  if (options.tls_ca.empty()) {
    if (!options.token.empty()) {
      return absl::InvalidArgumentError(
          "a bearer token without TLS (no --tls_ca) cannot be sent by channel "
          "credentials; build the channel with asgd::MakeChannel()");
    }
    return grpc::InsecureChannelCredentials();
  }
  auto tls = MakeTlsChannelCredentials(options);
  if (!tls.ok()) return tls.status();
  return WithToken(*std::move(tls), options.token);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& address, const SecurityOptions& options,
    const grpc::ChannelArguments& args) {
  if (absl::Status s = CheckClientOptions(options); !s.ok()) return s;
  if (options.tls_ca.empty()) {
    if (options.token.empty()) {
      return grpc::CreateCustomChannel(
          address, grpc::InsecureChannelCredentials(), args);
    }
    if (!options.allow_cleartext_token) {
      return absl::InvalidArgumentError(
          "--auth_token_file without TLS would send the bearer token in clear "
          "text: turn TLS on with --tls_ca, or pass --allow_cleartext_token "
          "if this network is trusted");
    }
    std::vector<
        std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(
        absl::StrCat(kBearerPrefix, options.token)));
    return grpc::experimental::CreateCustomChannelWithInterceptors(
        address, grpc::InsecureChannelCredentials(), args,
        std::move(interceptors));
  }
  auto tls = MakeTlsChannelCredentials(options);
  if (!tls.ok()) return tls.status();
  grpc::ChannelArguments channel_args = args;
  if (!options.tls_server_name.empty()) {
    channel_args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(
      address, WithToken(*std::move(tls), options.token), channel_args);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto contents = ReadWholeFile(path, "--auth_token_file");
  if (!contents.ok()) return contents.status();
  const absl::string_view token = absl::StripAsciiWhitespace(*contents);
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file file \"", path, "\" is empty"));
  }
  for (char c : token) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_token_file file \"", path,
          "\" holds a character that cannot travel in a gRPC header (use "
          "printable ASCII, e.g. `openssl rand -hex 32`)"));
    }
  }
  return std::string(token);
}

}  // namespace asgd
