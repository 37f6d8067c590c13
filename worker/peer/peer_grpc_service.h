// PeerServer: the Peer service (proto/peer.proto) a worker serves to the
// other workers in the decentralized modes, over gRPC's callback API.
//
//  * Average (adpsgd): averages the caller's model into this worker's
//    PeerModel and answers with the model as it was (peer_model.h).
//  * Reduce (allreduce): stores a ring-allreduce message in this worker's
//    AllreduceMailbox (allreduce.h).
//  * Describe: the group check every worker runs on every other before
//    training.
//  * AwaitDone: answered once MarkDone() was called (the end-of-training
//    barrier).
// Handlers only validate and hand over to the PeerModel or the mailbox; they
// never wait for the worker's training thread.
//
//   auto server = PeerServer::Start(options, &layout, &model, nullptr, &obs);
//   ... peers connect to host:(*server)->port() ...
//   (*server)->MarkDone(steps);
//   (*server)->Shutdown();
//
// Thread-safety: thread-safe. Shutdown() is idempotent and also run by the
// destructor; it answers pending AwaitDone calls first.
#ifndef ASGD_WORKER_PEER_PEER_GRPC_SERVICE_H_
#define ASGD_WORKER_PEER_PEER_GRPC_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/grpc_security.h"
#include "common/model_layout.h"
#include "grpcpp/server.h"
#include "proto/peer.grpc.pb.h"
#include "worker/peer/allreduce.h"
#include "worker/peer/peer_grpc_wire.h"
#include "worker/peer/peer_model.h"
#include "worker/peer/peer_observer.h"

namespace asgd {

struct PeerServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: a free port
  PeerGroup group;
  // The worker's own transport settings; the service serves with what
  // WorkerServiceSecurity() (common/grpc_security.h) derives from them.
  SecurityOptions security;
  int64_t max_chunk_elements = kDefaultMaxChunkElements;
};

class PeerService final : public asgd::v1::Peer::CallbackService {
 public:
  // `model` (adpsgd) or `mailbox` (allreduce) may be null: the matching RPC
  // then answers FAILED_PRECONDITION. `observer` may be null. All must
  // outlive the service.
  PeerService(const ModelLayout* layout, const PeerServerOptions& options,
              PeerModel* model, AllreduceMailbox* mailbox,
              PeerObserver* observer);

  // Answers every AwaitDone call, now and later, with `steps`.
  void MarkDone(uint64_t steps);
  // Averages this worker answered.
  int64_t averages_served() const { return averages_served_.load(); }

  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const asgd::v1::PeerHello* request,
                                     asgd::v1::PeerHello* reply) override;
  grpc::ServerBidiReactor<asgd::v1::PeerMessage, asgd::v1::PeerMessage>*
  Average(grpc::CallbackServerContext* context) override;
  grpc::ServerReadReactor<asgd::v1::PeerMessage>* Reduce(
      grpc::CallbackServerContext* context,
      asgd::v1::ReduceAck* reply) override;
  grpc::ServerUnaryReactor* AwaitDone(grpc::CallbackServerContext* context,
                                      const asgd::v1::AwaitDoneRequest* request,
                                      asgd::v1::AwaitDoneReply* reply) override;

 private:
  class AverageReactor;
  class ReduceReactor;

  const ModelLayout* const layout_;
  const PeerServerOptions options_;
  PeerModel* const model_;
  AllreduceMailbox* const mailbox_;
  PeerObserver* const observer_;
  std::atomic<int64_t> averages_served_{0};

  struct Waiter {
    grpc::ServerUnaryReactor* reactor;
    asgd::v1::AwaitDoneReply* reply;
  };
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

class PeerServer {
 public:
  // UNAVAILABLE when it cannot listen; InvalidArgument for bad security
  // settings.
  static absl::StatusOr<std::unique_ptr<PeerServer>> Start(
      const PeerServerOptions& options, const ModelLayout* layout,
      PeerModel* model, AllreduceMailbox* mailbox, PeerObserver* observer);
  ~PeerServer();

  int port() const { return port_; }
  PeerService* service() { return service_.get(); }
  void MarkDone(uint64_t steps) { service_->MarkDone(steps); }

  // Answers pending AwaitDone calls, then stops serving (in-flight calls get
  // up to `grace`).
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  PeerServer() = default;

  std::unique_ptr<PeerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_PEER_GRPC_SERVICE_H_
