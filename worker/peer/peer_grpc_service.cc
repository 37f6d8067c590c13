#include "worker/peer/peer_grpc_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace asgd {
namespace {

using asgd::v1::PeerHeader;
using asgd::v1::PeerMessage;

constexpr int kMaxMessageBytes = 4 << 20;

absl::Status CheckSender(const PeerServerOptions& options,
                         const PeerHeader& header) {
  if (header.layout_fingerprint() != options.group.layout_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", header.worker_index(), " holds another model (layout ",
        header.layout_fingerprint(), " vs ", options.group.layout_fingerprint,
        ")"));
  }
  if (header.worker_index() >=
          static_cast<uint32_t>(options.group.num_workers) ||
      header.worker_index() ==
          static_cast<uint32_t>(options.group.worker_index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sender worker index ", header.worker_index(),
                     " is not another worker of ", options.group.num_workers));
  }
  return absl::OkStatus();
}

}  // namespace

// Lifecycle: reads the initiator's transfer (header, chunks, commit) one
// message at a time; at the commit averages under the model's lock, then
// writes this worker's previous model back (header, chunks, commit) one
// write at a time and finishes. Any bad message finishes the call with its
// error and leaves the model untouched. Deletes itself in OnDone().
class PeerService::AverageReactor
    : public grpc::ServerBidiReactor<PeerMessage, PeerMessage> {
 public:
  AverageReactor(PeerService* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        incoming_(service->layout_, service->options_.max_chunk_elements,
                  [this](const PeerHeader& h) { return Expect(h); }) {
    if (service_->model_ == nullptr) {
      Finish(ToGrpcStatus(absl::FailedPreconditionError(
          absl::StrCat("worker ", service_->options_.group.worker_index,
                       " trains with ", service_->options_.group.mode,
                       ", not adpsgd: it averages with no one"))));
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError(
          "average stream ended before its commit; nothing was averaged")));
      return;
    }
    absl::Status s = incoming_.Add(in_);
    if (!s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    if (!incoming_.committed()) {
      StartRead(&in_);
      return;
    }
    if (context_->IsCancelled()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                          "the initiator gave up before the averaging"));
      return;
    }
    const int64_t n = service_->layout_->total_size();
    before_.resize(n);
    const double distance = service_->model_->AverageAsResponder(
        incoming_.values(), absl::MakeSpan(before_));
    ++service_->averages_served_;
    if (service_->observer_ != nullptr) {
      service_->observer_->OnAverageServed(distance);
    }
    PeerHeader header;
    header.set_worker_index(service_->options_.group.worker_index);
    header.set_layout_fingerprint(service_->options_.group.layout_fingerprint);
    header.set_step(incoming_.header().step());
    outgoing_.emplace(service_->layout_, std::move(header), FlatRange{0, n},
                      before_.data(), service_->options_.max_chunk_elements);
    NextWrite();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "answer write failed"));
      return;
    }
    NextWrite();
  }

  void OnDone() override { delete this; }

 private:
  absl::StatusOr<FlatRange> Expect(const PeerHeader& header) {
    ASGD_RETURN_IF_ERROR(CheckSender(service_->options_, header));
    return FlatRange{0, service_->layout_->total_size()};
  }

  void NextWrite() {
    if (next_ == outgoing_->num_messages()) {
      Finish(grpc::Status::OK);
      return;
    }
    outgoing_->Fill(next_++, &out_);
    StartWrite(&out_);
  }

  PeerService* const service_;
  grpc::CallbackServerContext* const context_;
  IncomingTransfer incoming_;
  PeerMessage in_;
  PeerMessage out_;
  std::vector<float> before_;
  std::optional<OutgoingTransfer> outgoing_;
  size_t next_ = 0;
};

// Lifecycle: reads one allreduce message (header, chunks, commit), stores it
// in the mailbox and finishes; deletes itself in OnDone().
class PeerService::ReduceReactor : public grpc::ServerReadReactor<PeerMessage> {
 public:
  explicit ReduceReactor(PeerService* service)
      : service_(service),
        incoming_(service->layout_, service->options_.max_chunk_elements,
                  [this](const PeerHeader& h) { return Expect(h); }) {
    if (service_->mailbox_ == nullptr) {
      Finish(ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
          "worker ", service_->options_.group.worker_index, " trains with ",
          service_->options_.group.mode, ", not allreduce"))));
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError(
          "allreduce message ended before its commit")));
      return;
    }
    absl::Status s = incoming_.Add(in_);
    if (s.ok() && !incoming_.committed()) {
      StartRead(&in_);
      return;
    }
    if (s.ok()) {
      s = service_->mailbox_->Deliver(
          incoming_.header().step(),
          static_cast<int>(incoming_.header().round()),
          std::move(incoming_.values()));
    }
    Finish(ToGrpcStatus(s));
  }

  void OnDone() override { delete this; }

 private:
  absl::StatusOr<FlatRange> Expect(const PeerHeader& header) {
    ASGD_RETURN_IF_ERROR(CheckSender(service_->options_, header));
    if (header.round() >= (1u << 30)) {
      return absl::InvalidArgumentError("allreduce round out of range");
    }
    return service_->mailbox_->ExpectedRange(
        static_cast<int>(header.worker_index()),
        static_cast<int>(header.round()));
  }

  PeerService* const service_;
  IncomingTransfer incoming_;
  PeerMessage in_;
};

PeerService::PeerService(const ModelLayout* layout,
                         const PeerServerOptions& options, PeerModel* model,
                         AllreduceMailbox* mailbox, PeerObserver* observer)
    : layout_(layout),
      options_(options),
      model_(model),
      mailbox_(mailbox),
      observer_(observer) {}

void PeerService::MarkDone(uint64_t steps) {
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    done_ = true;
    steps_ = steps;
    waiters.swap(waiters_);
  }
  for (const Waiter& w : waiters) {
    w.reply->set_steps(steps);
    w.reactor->Finish(grpc::Status::OK);
  }
}

grpc::ServerUnaryReactor* PeerService::Describe(
    grpc::CallbackServerContext* context, const asgd::v1::PeerHello* request,
    asgd::v1::PeerHello* reply) {
  auto* reactor = context->DefaultReactor();
  absl::Status s = CheckSameGroup(options_.group, *request);
  if (s.ok()) *reply = ToHello(options_.group);
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

grpc::ServerBidiReactor<PeerMessage, PeerMessage>* PeerService::Average(
    grpc::CallbackServerContext* context) {
  return new AverageReactor(this, context);
}

grpc::ServerReadReactor<PeerMessage>* PeerService::Reduce(
    grpc::CallbackServerContext* /*context*/, asgd::v1::ReduceAck* /*reply*/) {
  return new ReduceReactor(this);
}

grpc::ServerUnaryReactor* PeerService::AwaitDone(
    grpc::CallbackServerContext* context,
    const asgd::v1::AwaitDoneRequest* /*request*/,
    asgd::v1::AwaitDoneReply* reply) {
  auto* reactor = context->DefaultReactor();
  absl::MutexLock lock(&mu_);
  if (done_) {
    reply->set_steps(steps_);
    reactor->Finish(grpc::Status::OK);
  } else {
    // Answered by MarkDone() (Shutdown() calls it), also if the caller has
    // given up by then.
    waiters_.push_back(Waiter{reactor, reply});
  }
  return reactor;
}

absl::StatusOr<std::unique_ptr<PeerServer>> PeerServer::Start(
    const PeerServerOptions& options, const ModelLayout* layout,
    PeerModel* model, AllreduceMailbox* mailbox, PeerObserver* observer) {
  ASGD_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ServerCredentials> credentials,
      MakeServerCredentials(WorkerServiceSecurity(options.security)));
  auto server = std::unique_ptr<PeerServer>(new PeerServer());
  server->service_ =
      std::make_unique<PeerService>(layout, options, model, mailbox, observer);
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.experimental().SetInterceptorCreators(
      MakeServerInterceptors(WorkerServiceSecurity(options.security)));
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for peers on ", address));
  }
  return server;
}

PeerServer::~PeerServer() { Shutdown(); }

void PeerServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (service_) service_->MarkDone(0);
  if (server_) server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

}  // namespace asgd
