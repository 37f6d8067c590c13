#include "worker/pipeline/stage_grpc_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace asgd {

using asgd::v1::StageBackward;
using asgd::v1::StageForward;

class StageServer::Service final : public asgd::v1::Stage::CallbackService {
 public:
  explicit Service(StageServer* server) : server_(server) {}
  grpc::ServerBidiReactor<StageForward, StageBackward>* Relay(
      grpc::CallbackServerContext* context) override;

 private:
  StageServer* const server_;
};

// Lifecycle: attaches to the server (or finishes at once, refused), then
// keeps one read in flight until the caller closes or an error; writes and
// the Finish come from StageServer::Pump(), one write at a time. Deletes
// itself in OnDone().
class StageServer::RelayReactor final
    : public grpc::ServerBidiReactor<StageForward, StageBackward> {
 public:
  explicit RelayReactor(StageServer* server) : server_(server) {
    absl::Status s = server_->Attach(this);
    if (!s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    attached_ = true;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      server_->InputClosed();
      server_->Pump();
      return;
    }
    server_->ReadCallback(true);
    absl::Status s = server_->Deliver(in_);
    if (s.ok()) {
      StartRead(&in_);
    } else {
      server_->Broken(s);
    }
    server_->ReadCallback(false);
    server_->Pump();
  }

  void OnWriteDone(bool ok) override {
    server_->Written(ok);
    server_->Pump();
  }

  void OnCancel() override {
    if (!attached_) return;
    server_->Broken(absl::UnavailableError(
        "the stream from the previous stage was cancelled: it failed or went "
        "away"));
    server_->Pump();
  }

  void OnDone() override {
    if (attached_) server_->Detach();
    delete this;
  }

 private:
  StageServer* const server_;
  bool attached_ = false;
  StageForward in_;
};

grpc::ServerBidiReactor<StageForward, StageBackward>*
StageServer::Service::Relay(grpc::CallbackServerContext* /*context*/) {
  return new RelayReactor(server_);
}

StageServer::StageServer(const StageServerOptions& options)
    : options_(options), receiver_(options.group, options.shape) {}

StageServer::~StageServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<StageServer>> StageServer::Start(
    const StageServerOptions& options) {
  const SecurityOptions security = WorkerServiceSecurity(options.security);
  ASGD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                        MakeServerCredentials(security));
  auto server = std::unique_ptr<StageServer>(new StageServer(options));
  server->service_ = std::make_unique<Service>(server.get());
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, credentials, &server->port_);
  // The largest message is one minibatch of activations and labels.
  const int64_t max_bytes =
      int64_t{options.shape.max_rows} *
          (int64_t{options.shape.width} + options.shape.labels_per_row) * 4 +
      (64 << 10);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(max_bytes, int64_t{1} << 30)));
  // The caller pings an idle stream (stage_grpc_client.cc); allow it.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.experimental().SetInterceptorCreators(
      MakeServerInterceptors(security));
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "stage ", options.group.stage, " cannot listen on ", address));
  }
  return server;
}

void StageServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  Abort(absl::UnavailableError(
      absl::StrCat("stage ", options_.group.stage, " shut down")));
  if (server_) server_->Shutdown(absl::ToChronoTime(absl::Now() +
                                                    absl::Seconds(1)));
}

int64_t StageServer::received() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(receiver_.received());
}

absl::Status StageServer::Attach(RelayReactor* reactor) {
  absl::MutexLock lock(&mu_);
  if (opened_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", options_.group.stage,
        " already has its stream from the previous stage (one per run)"));
  }
  opened_ = true;
  reactor_ = reactor;
  return absl::OkStatus();
}

absl::Status StageServer::Deliver(const StageForward& msg) {
  absl::MutexLock lock(&mu_);
  ASGD_ASSIGN_OR_RETURN(std::optional<StageBatch> batch, receiver_.Take(msg));
  if (batch.has_value()) inbox_.push_back(*std::move(batch));
  return absl::OkStatus();
}

void StageServer::DropQueuedAnswers() {
  // The answer being written stays until OnWriteDone.
  outbox_.erase(outbox_.begin() + (writing_ ? 1 : 0), outbox_.end());
}

void StageServer::ReadCallback(bool inside) {
  absl::MutexLock lock(&mu_);
  in_read_callback_ = inside;
}

void StageServer::InputClosed() {
  absl::MutexLock lock(&mu_);
  if (!receiver_.ended() && broken_.ok()) {
    broken_ = absl::UnavailableError(
        "the previous stage closed its stream before the end: it failed or "
        "went away");
    DropQueuedAnswers();
    if (!finish_.has_value()) finish_ = broken_;
  }
}

void StageServer::Broken(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (broken_.ok()) broken_ = status;
  DropQueuedAnswers();
  if (!finish_.has_value() || finish_->ok()) finish_ = std::move(status);
}

void StageServer::Written(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!outbox_.empty()) outbox_.pop_front();
  if (!ok && broken_.ok()) {
    broken_ = absl::UnavailableError(
        "an answer to the previous stage could not be written: it went away");
    DropQueuedAnswers();
    finish_ = broken_;
  }
}

void StageServer::Detach() {
  absl::MutexLock lock(&mu_);
  reactor_ = nullptr;
  if (broken_.ok() && !(finish_.has_value() && finish_->ok())) {
    broken_ = absl::UnavailableError("the previous stage's stream ended");
  }
}

void StageServer::Pump() {
  RelayReactor* reactor = nullptr;
  const StageBackward* write = nullptr;
  grpc::Status finish;
  {
    absl::MutexLock lock(&mu_);
    reactor = reactor_;
    if (reactor == nullptr || finished_ || writing_) return;
    if (!outbox_.empty()) {
      writing_ = true;
      write = &outbox_.front();
    } else if (finish_.has_value() && !in_read_callback_) {
      finished_ = true;
      finish = ToGrpcStatus(*finish_);
    } else {
      return;
    }
  }
  // Outside mu_: OnDone (which takes mu_) waits for the Finish, and a
  // write in progress keeps every other Pump from finishing.
  if (write != nullptr) {
    reactor->StartWrite(write);
  } else {
    reactor->Finish(finish);
  }
}

absl::StatusOr<std::optional<StageBatch>> StageServer::Receive() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !inbox_.empty() || receiver_.ended() || !broken_.ok();
  };
  const bool opened = opened_;
  const absl::Duration timeout =
      opened ? options_.idle_timeout : options_.connect_timeout;
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "stage ", options_.group.stage,
        opened ? ": no minibatch from the previous stage for "
               : ": the previous stage did not connect within ",
        absl::FormatDuration(timeout)));
  }
  if (!broken_.ok()) return broken_;
  if (inbox_.empty()) return std::optional<StageBatch>();
  StageBatch batch = std::move(inbox_.front());
  inbox_.pop_front();
  return std::optional<StageBatch>(std::move(batch));
}

absl::Status StageServer::Answer(StageGrad grad) {
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    if (reactor_ == nullptr) {
      return absl::InternalError("an answer with no stream");
    }
    ASGD_RETURN_IF_ERROR(receiver_.Answered());
    outbox_.emplace_back();
    EncodeBackward(grad, &outbox_.back());
  }
  Pump();
  return absl::OkStatus();
}

absl::Status StageServer::Finish() {
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    if (!receiver_.ended() || receiver_.unanswered() != 0 ||
        !inbox_.empty()) {
      return absl::InternalError("finished before the last answer");
    }
    finish_ = absl::OkStatus();
  }
  Pump();
  // The caller waits for the OK: stay until it is sent.
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reactor_ == nullptr;
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), options_.idle_timeout);
  return absl::OkStatus();
}

void StageServer::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (broken_.ok()) broken_ = status;
    DropQueuedAnswers();
    // The first error wins: a stream already refused (a plan that does not
    // match, a malformed message) is finished with that reason, not with
    // the shutdown that follows it.
    if (!finish_.has_value() || finish_->ok()) {
      finish_ = absl::Status(status.code(),
                             absl::StrCat("stage ", options_.group.stage,
                                          " failed: ", status.message()));
    }
  }
  Pump();
}

}  // namespace asgd
