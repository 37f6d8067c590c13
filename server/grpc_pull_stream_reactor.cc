#include "server/grpc_pull_stream_reactor.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/refusal.h"
#include "common/tensor_wire.h"
#include "common/wire_codec.h"
#include "proto/asgd.pb.h"
#include "server/delta_pulls.h"
#include "server/grpc_call.h"
#include "server/grpc_service.h"
#include "server/grpc_stream_reactor.h"

namespace asgd {
namespace {

using asgd::v1::PushReply;

// Many pulls on one stream (see the lifecycle in grpc_pull_stream_reactor.h;
// locking as StreamReactor).
class PullStreamReactor : public StreamReactor<PullStreamReactor> {
 public:
  PullStreamReactor(GrpcParameterService* service, ParamStore* store,
                    ServerMetrics* metrics,
                    grpc::CallbackServerContext* context)
      : StreamReactor(service, metrics, RpcMethod::kPullStream,
                      CallKind::kPullStream, context),
        store_(store),
        metrics_(metrics) {
    absl::MutexLock lock(&state_->mu);
    if (absl::Status status = AdmitLocked(); !status.ok()) {
      FinishLocked(status);
      return;
    }
    WaitForRequestLocked();
  }

  void OnReadDone(bool ok) override {
    absl::ReleasableMutexLock lock(&state_->mu);
    if (finished_) return;
    if (!ok) {
      FinishLocked(absl::OkStatus());  // the client ended its side
      return;
    }
    StopIdleWatchLocked();
    asgd::v1::PullRequest request;
    absl::Status status =
        ParseFromByteBuffer(request_, &request, "pull request");
    if (status.ok()) status = CheckPullDtype(request.dtype());
    if (status.ok() && request.has_admm_slot()) {
      status = CheckSlotPull(*store_, request.admm_slot(), request.delta());
    }
    if (status.ok() && request.delta()) status = CheckDeltaRequest(request);
    if (!status.ok()) {
      FinishLocked(status);
      return;
    }
    WatchProgressLocked();
    if (request.delta()) {
      DeltaPlan plan;
      switch (service_->delta_pulls()->Plan(
          request.has_copy(), request.model_version(), request.lineage(),
          request.replays_mask(), &plan)) {
        case DeltaPulls::Answer::kPlan:
          writer_.emplace(store_, metrics_, std::move(plan),
                          service_->delta_pulls()->lineage());
          WriteNextLocked();
          return;
        case DeltaPulls::Answer::kNeedBase: {
          // Answered when the base is taken (on a shard thread, or at once
          // when none can be), through state_, outside this lock: the
          // reactor may end meanwhile (the progress watchdog).
          waiting_for_base_ = true;
          worker_id_ = request.worker_id();
          DeltaPulls* const delta = service_->delta_pulls();
          std::shared_ptr<State> state = state_;
          lock.Release();
          delta->RequestBase([state](std::optional<DeltaPlan> plan) {
            absl::MutexLock lock(&state->mu);
            if (state->reactor != nullptr) {
              state->reactor->BaseReadyLocked(std::move(plan));
            }
          });
          return;
        }
        case DeltaPulls::Answer::kWeights:
          break;
      }
    }
    writer_.emplace(
        store_, metrics_, request.worker_id(),
        static_cast<WireDtype>(request.dtype()),
        /*end_marker=*/true,
        request.has_admm_slot() ? static_cast<int>(request.admm_slot()) : -1);
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&state_->mu);
    if (finished_) return;
    if (!ok) {
      FinishLocked(absl::CancelledError("pull write failed"));
      return;
    }
    TouchProgressLocked();
    WriteNextLocked();
  }

 private:
  friend class StreamReactor<PullStreamReactor>;

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (NextPullBuffer(&*writer_, &msg_)) {
      StartWrite(&msg_);
      return;
    }
    // The pull is complete: idle again.
    writer_.reset();
    msg_.Clear();
    StopProgressWatchLocked();
    WaitForRequestLocked();
  }

  // InvalidArgument unless this server can answer the delta request.
  absl::Status CheckDeltaRequest(const asgd::v1::PullRequest& request) const {
    if (service_->delta_pulls() == nullptr) {
      return absl::InvalidArgumentError(
          "this server does not answer delta pulls (ModelDescription."
          "delta_pulls is false: its optimizer keeps momentum or delay "
          "compensation, it trains synchronously, or --delta_log_mb is 0)");
    }
    if (request.dtype() != asgd::v1::FLOAT32) {
      return absl::InvalidArgumentError(
          "a delta pull sends float32 weights and updates; ask for FLOAT32");
    }
    return absl::OkStatus();
  }

  // The base a delta pull waited for is taken (or none could be: weights).
  void BaseReadyLocked(std::optional<DeltaPlan> plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || !waiting_for_base_) return;
    waiting_for_base_ = false;
    if (plan.has_value()) {
      writer_.emplace(store_, metrics_, std::move(*plan),
                      service_->delta_pulls()->lineage());
    } else {
      writer_.emplace(store_, metrics_, worker_id_, WireDtype::kFloat32,
                      /*end_marker=*/true);
    }
    TouchProgressLocked();
    WriteNextLocked();
  }

  void WaitForRequestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (!WatchIdleLocked()) {
      FinishLocked(StreamEnd(service_));
      return;
    }
    StartRead(&request_);
  }

  void IdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || writer_.has_value() || waiting_for_base_) return;
    FinishLocked(StreamEnd(service_));
  }

  // True when the stream must be cancelled too (see WatchProgressLocked).
  bool StalledLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || (!writer_.has_value() && !waiting_for_base_)) {
      return false;
    }
    if (waiting_for_base_) {
      FinishLocked(absl::DeadlineExceededError(absl::StrCat(
          "the consistent copy of the weights for a delta pull took longer "
          "than ",
          absl::FormatDuration(service_->watchdog()->timeout()),
          "; stream ended by the server")));
      return false;
    }
    FinishLocked(absl::DeadlineExceededError(
        absl::StrCat("the client read nothing of its pull for ",
                     absl::FormatDuration(service_->watchdog()->timeout()),
                     "; stream ended by the server")));
    return true;
  }

  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return;
    writer_.reset();
    EndLocked(status);
  }

  ParamStore* const store_;
  ServerMetrics* const metrics_;
  grpc::ByteBuffer request_;
  std::optional<PullWriter> writer_;  // while a pull is written
  // A delta pull waiting for a base (DeltaPulls::RequestBase).
  bool waiting_for_base_ ABSL_GUARDED_BY(state_->mu) = false;
  uint64_t worker_id_ = 0;
  grpc::ByteBuffer msg_;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewPullStreamReactor(GrpcParameterService* service, ParamStore* store,
                     ServerMetrics* metrics,
                     grpc::CallbackServerContext* context) {
  return new PullStreamReactor(service, store, metrics, context);
}

}  // namespace asgd
