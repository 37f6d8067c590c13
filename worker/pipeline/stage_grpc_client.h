// GrpcDownstream: stage s's DownstreamLink (stage_link.h) to stage s + 1,
// one Relay stream (proto/pipeline.proto): the hello, then each minibatch's
// activations; the answers are read in order and checked (stage_wire.h).
//
// The stream lives as long as the run, so it has no deadline; instead the
// channel pings an idle connection (every 10 s, 10 s to answer), so a stage
// whose host vanished is noticed, and one that was killed is noticed at
// once. (A next stage that is alive but never answers is not: this stage,
// and the ones before it, then wait for it.) Every failure names the next stage and its address and carries the
// stream's status code (UNAVAILABLE: it went away; what it refused with
// otherwise).
//
//   auto down = GrpcDownstream::Connect(options);
//   ... StageRunner::Run(params, up, down->get()) ...
//
// Thread-safety: one stage thread; Abort() from any thread.
#ifndef ASGD_WORKER_PIPELINE_STAGE_GRPC_CLIENT_H_
#define ASGD_WORKER_PIPELINE_STAGE_GRPC_CLIENT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "grpcpp/grpcpp.h"
#include "proto/pipeline.grpc.pb.h"
#include "worker/pipeline/stage_link.h"
#include "worker/pipeline/stage_wire.h"

namespace asgd {

struct GrpcDownstreamOptions {
  std::string address;  // host:port of stage s + 1
  StageGroup group;     // this stage's view; in_flight its window
  int out_width = 1;    // values per row this stage sends
  int labels_per_row = 1;
  SecurityOptions security;
  // How long the next stage may take to come up.
  absl::Duration connect_timeout = absl::Seconds(60);
};

class GrpcDownstream final : public DownstreamLink {
 public:
  // Waits for the next stage (connect_timeout) and opens the stream with
  // the hello. Unavailable when it does not come up in time.
  static absl::StatusOr<std::unique_ptr<GrpcDownstream>> Connect(
      const GrpcDownstreamOptions& options);
  ~GrpcDownstream() override;

  absl::Status Send(const StageBatch& batch) override;
  absl::Status SendEnd() override;
  absl::StatusOr<StageGrad> Receive() override;
  absl::Status Finish() override;
  void Abort(const absl::Status& status) override;

 private:
  explicit GrpcDownstream(const GrpcDownstreamOptions& options);
  // The stream's final status, named after the next stage.
  absl::Status Broken(absl::string_view what);

  struct Sent {
    uint64_t seq;
    int64_t rows;
    bool evaluate;
  };

  const GrpcDownstreamOptions options_;
  std::unique_ptr<asgd::v1::Stage::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<asgd::v1::StageForward, asgd::v1::StageBackward>>
      stream_;
  std::deque<Sent> sent_;  // unanswered, oldest first
  uint64_t next_seq_ = 0;
  bool done_ = false;  // Finish called on the stream
  absl::Status error_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_GRPC_CLIENT_H_
