// StageServer: the Stage service (proto/pipeline.proto) that stage s > 0
// of a pipeline serves to stage s - 1, over gRPC's callback API, and the
// stage's UpstreamLink (stage_link.h): what the stream delivers, the stage
// receives; what the stage answers, the stream writes.
//
// One stream per run: a second one, concurrent or later, is refused
// (FAILED_PRECONDITION). Every message is checked before anything of it is
// used (stage_wire.h); a bad one ends the stream with its error and the
// stage's next Receive returns the same error. The caller may keep at most
// options.group.in_flight minibatches unanswered; one more is
// RESOURCE_EXHAUSTED. A stream that closes without its StageEnd means the
// caller failed or went away: Receive and Answer then fail with
// UNAVAILABLE. Abort() ends the stream with the stage's error, which the
// caller receives as the stream's status, unless the stream was already
// refused: then the caller receives that first error.
//
//   auto server = StageServer::Start(options);   // listens on port()
//   ... StageRunner::Run(params, server->get(), downstream) ...
//
// Thread-safety: thread-safe. The UpstreamLink methods are called by one
// stage thread. Shutdown() is idempotent and also run by the destructor.
#ifndef ASGD_WORKER_PIPELINE_STAGE_GRPC_SERVICE_H_
#define ASGD_WORKER_PIPELINE_STAGE_GRPC_SERVICE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "grpcpp/server.h"
#include "proto/pipeline.grpc.pb.h"
#include "worker/pipeline/stage_link.h"
#include "worker/pipeline/stage_wire.h"

namespace asgd {

struct StageServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: a free port
  // This stage's view of the pipeline; in_flight is the window it allows
  // its caller (StageWindow(depth, stage - 1)).
  StageGroup group;
  ActivationShape shape;  // of the activations it receives
  // The worker's own transport settings; the service serves with what
  // WorkerServiceSecurity() (common/grpc_security.h) derives from them.
  SecurityOptions security;
  // Receive waits this long for stage s - 1 to connect, then this long
  // (idle_timeout) between minibatches: DEADLINE_EXCEEDED after.
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration idle_timeout = absl::Seconds(60);
};

class StageServer final : public UpstreamLink {
 public:
  // Unavailable when the port cannot be bound; InvalidArgument for bad
  // security settings.
  static absl::StatusOr<std::unique_ptr<StageServer>> Start(
      const StageServerOptions& options);
  ~StageServer() override;

  int port() const { return port_; }

  absl::StatusOr<std::optional<StageBatch>> Receive() override;
  absl::Status Answer(StageGrad grad) override;
  absl::Status Finish() override;
  void Abort(const absl::Status& status) override;

  // Minibatches received so far (every stream).
  int64_t received() const;

  void Shutdown();

 private:
  class Service;
  class RelayReactor;
  friend class RelayReactor;

  explicit StageServer(const StageServerOptions& options);

  // Reactor side, each under mu_. The status ends the stream.
  absl::Status Attach(RelayReactor* reactor);
  absl::Status Deliver(const asgd::v1::StageForward& msg);
  void InputClosed();
  void Broken(absl::Status status);
  void Written(bool ok);
  void DropQueuedAnswers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadCallback(bool inside);
  void Detach();
  // Writes the next queued answer if none is being written, or finishes
  // the stream once all are written and the stage asked to; call without
  // mu_.
  void Pump();

  const StageServerOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;

  mutable absl::Mutex mu_;
  RelayReactor* reactor_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool opened_ ABSL_GUARDED_BY(mu_) = false;    // a stream was accepted
  RelayReceiver receiver_ ABSL_GUARDED_BY(mu_);  // the stream's checks
  absl::Status broken_ ABSL_GUARDED_BY(mu_);    // the stream's failure
  std::deque<StageBatch> inbox_ ABSL_GUARDED_BY(mu_);
  std::deque<asgd::v1::StageBackward> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // In OnReadDone (which may still start the next read): Finish waits.
  bool in_read_callback_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> finish_ ABSL_GUARDED_BY(mu_);  // requested
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_GRPC_SERVICE_H_
