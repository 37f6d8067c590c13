#include "worker/pipeline/stage_grpc_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace asgd {

using asgd::v1::StageBackward;
using asgd::v1::StageForward;

GrpcDownstream::GrpcDownstream(const GrpcDownstreamOptions& options)
    : options_(options) {}

GrpcDownstream::~GrpcDownstream() {
  if (stream_ != nullptr && !done_) {
    context_.TryCancel();
    stream_->Finish();
  }
}

absl::StatusOr<std::unique_ptr<GrpcDownstream>> GrpcDownstream::Connect(
    const GrpcDownstreamOptions& options) {
  auto down = std::unique_ptr<GrpcDownstream>(new GrpcDownstream(options));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(1 << 30);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  ASGD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                        MakeChannel(options.address, options.security, args));
  if (!channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "stage ", options.group.stage + 1, " at ", options.address,
        " did not come up within ",
        absl::FormatDuration(options.connect_timeout),
        " (check --next_stage and that it runs)"));
  }
  down->stub_ = asgd::v1::Stage::NewStub(channel);
  down->stream_ = down->stub_->Relay(&down->context_);
  StageForward hello;
  *hello.mutable_hello() = ToHello(options.group);
  if (!down->stream_->Write(hello)) return down->Broken("the hello");
  return down;
}

absl::Status GrpcDownstream::Broken(absl::string_view what) {
  if (!error_.ok()) return error_;
  grpc::Status s = grpc::Status::OK;
  if (!done_) {
    done_ = true;
    // Finish waits for the answers still queued: a broken stream has none
    // to give, only those that arrived before.
    StageBackward unread;
    while (stream_->Read(&unread)) {
    }
    s = stream_->Finish();
  }
  absl::Status status = FromGrpcStatus(s);
  if (status.ok()) {
    status = absl::UnavailableError("the stream ended early");
  }
  error_ = absl::Status(
      status.code(),
      absl::StrCat("stage ", options_.group.stage + 1, " at ",
                   options_.address, " (", what, "): ", status.message()));
  return error_;
}

absl::Status GrpcDownstream::Send(const StageBatch& batch) {
  if (!error_.ok()) return error_;
  StageForward msg;
  EncodeActivations(batch, msg.mutable_activations());
  msg.mutable_activations()->set_seq(next_seq_);
  if (!stream_->Write(msg)) {
    return Broken(absl::StrCat("sending minibatch ", batch.seq));
  }
  sent_.push_back(Sent{next_seq_, batch.rows(), batch.evaluate});
  ++next_seq_;
  return absl::OkStatus();
}

absl::StatusOr<StageGrad> GrpcDownstream::Receive() {
  if (!error_.ok()) return error_;
  if (sent_.empty()) {
    return absl::InternalError("waiting for an answer to nothing");
  }
  StageBackward msg;
  if (!stream_->Read(&msg)) {
    return Broken(absl::StrCat("waiting for the answer to minibatch ",
                               sent_.front().seq));
  }
  const Sent oldest = sent_.front();
  auto grad =
      DecodeBackward(msg, oldest.seq,
                     oldest.evaluate ? 0 : oldest.rows * options_.out_width,
                     oldest.rows * options_.labels_per_row);
  if (!grad.ok()) {
    error_ = absl::Status(
        grad.status().code(),
        absl::StrCat("stage ", options_.group.stage + 1, " at ",
                     options_.address, " answered badly: ",
                     grad.status().message()));
    context_.TryCancel();
    return error_;
  }
  sent_.pop_front();
  return grad;
}

absl::Status GrpcDownstream::SendEnd() {
  if (!error_.ok()) return error_;
  StageForward end;
  end.mutable_end()->set_minibatches(next_seq_);
  if (!stream_->Write(end)) return Broken("sending the end");
  return absl::OkStatus();
}

absl::Status GrpcDownstream::Finish() {
  if (!error_.ok()) return error_;
  if (!sent_.empty()) {
    return absl::InternalError("finishing with minibatches unanswered");
  }
  if (!stream_->WritesDone()) return Broken("closing the stream");
  StageBackward extra;
  if (stream_->Read(&extra)) {
    context_.TryCancel();
    // Drains and finishes the cancelled stream; its status is replaced by
    // what went wrong.
    Broken("after the end").IgnoreError();
    error_ = absl::InvalidArgumentError(
        absl::StrCat("stage ", options_.group.stage + 1, " at ",
                     options_.address, " answered after the end"));
    return error_;
  }
  done_ = true;
  absl::Status s = FromGrpcStatus(stream_->Finish());
  if (!s.ok()) {
    error_ = absl::Status(s.code(), absl::StrCat(
        "stage ", options_.group.stage + 1, " at ", options_.address,
        " at the end: ", s.message()));
  }
  return error_;
}

void GrpcDownstream::Abort(const absl::Status& /*status*/) {
  context_.TryCancel();
}

}  // namespace asgd
