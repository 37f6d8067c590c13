#include "worker/peer/peer_grpc_client.h"

#include <algorithm>
#include <future>
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

void SetDeadline(grpc::ClientContext* ctx, absl::Time deadline) {
  ctx->set_deadline(absl::ToChronoTime(deadline));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcPeerClient>> GrpcPeerClient::Create(
    const std::vector<std::string>& addresses, const ModelLayout* layout,
    const GrpcPeerClientOptions& options) {
  const int n = options.group.num_workers;
  const int me = options.group.worker_index;
  if (static_cast<int>(addresses.size()) != n || me < 0 || me >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", me, " of ", n, " got ", addresses.size(),
        " peer addresses; want one per worker, in worker-index order"));
  }
  auto client =
      std::unique_ptr<GrpcPeerClient>(new GrpcPeerClient(layout, options));
  client->addresses_ = addresses;
  client->stubs_.resize(n);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  // A peer that restarts is found again within seconds, not minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    ASGD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(addresses[p], options.security, args));
    client->stubs_[p] = asgd::v1::Peer::NewStub(channel);
  }
  // The group check, with every peer concurrently.
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  const asgd::v1::PeerHello hello = ToHello(options.group);
  auto describe = [&client, &hello, deadline](int p) -> absl::Status {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // peers may still be starting
    SetDeadline(&ctx, deadline);
    asgd::v1::PeerHello theirs;
    grpc::Status s = client->stubs_[p]->Describe(&ctx, hello, &theirs);
    if (!s.ok()) {
      return absl::Status(
          FromGrpcStatus(s).code(),
          absl::StrCat("no answer from worker ", p, " at ",
                       client->addresses_[p], ": ", s.error_message()));
    }
    ASGD_RETURN_IF_ERROR(CheckSameGroup(client->options_.group, theirs));
    if (theirs.worker_index() != static_cast<uint32_t>(p)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the peer at ", client->addresses_[p], " is worker ",
                       theirs.worker_index(), ", but is listed as worker ", p,
                       " (list peers in worker-index order)"));
    }
    return absl::OkStatus();
  };
  std::vector<std::future<absl::Status>> checks;
  for (int p = 0; p < n; ++p) {
    if (p != me) checks.push_back(std::async(std::launch::async, describe, p));
  }
  absl::Status status;
  for (auto& c : checks) {
    absl::Status s = c.get();
    if (status.ok()) status = s;
  }
  ASGD_RETURN_IF_ERROR(status);
  return client;
}

absl::Status GrpcPeerClient::CheckPeer(int peer) const {
  if (peer < 0 || peer >= num_workers() || stubs_[peer] == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", peer, " is no peer of worker ", worker_index()));
  }
  return absl::OkStatus();
}

absl::Status GrpcPeerClient::WithPeer(int peer, absl::Status status) const {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("worker ", peer, " (", addresses_[peer],
                                   "): ", status.message()));
}

absl::Status GrpcPeerClient::Average(int peer, uint64_t step,
                                     absl::Span<const float> mine,
                                     absl::Span<float> theirs) {
  ASGD_RETURN_IF_ERROR(CheckPeer(peer));
  const int64_t n = layout_->total_size();
  if (static_cast<int64_t>(mine.size()) != n ||
      static_cast<int64_t>(theirs.size()) != n) {
    return absl::InvalidArgumentError("average buffers have the wrong size");
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx, absl::Now() + options_.average_timeout);
  auto stream = stubs_[peer]->Average(&ctx);
  PeerHeader header;
  header.set_worker_index(worker_index());
  header.set_layout_fingerprint(options_.group.layout_fingerprint);
  header.set_step(step);
  const OutgoingTransfer out(layout_, std::move(header), FlatRange{0, n},
                             mine.data(), options_.max_chunk_elements);
  PeerMessage msg;
  bool ok = true;
  for (size_t i = 0; ok && i < out.num_messages(); ++i) {
    out.Fill(i, &msg);
    ok = stream->Write(msg);
  }
  if (ok) stream->WritesDone();
  IncomingTransfer in(
      layout_, options_.max_chunk_elements,
      [this, peer, n](const PeerHeader& h) -> absl::StatusOr<FlatRange> {
        if (h.worker_index() != static_cast<uint32_t>(peer) ||
            h.layout_fingerprint() != options_.group.layout_fingerprint) {
          return absl::DataLossError(
              "the answer comes from another worker or model");
        }
        return FlatRange{0, n};
      });
  absl::Status bad;
  while (stream->Read(&msg)) {
    if (bad.ok()) bad = in.Add(msg);
    if (!bad.ok()) ctx.TryCancel();
  }
  const grpc::Status status = stream->Finish();
  if (!bad.ok()) return WithPeer(peer, bad);
  ASGD_RETURN_IF_ERROR(WithPeer(peer, FromGrpcStatus(status)));
  if (!in.committed()) {
    return WithPeer(peer,
                    absl::DataLossError("the answer ended before its commit"));
  }
  std::copy(in.values().begin(), in.values().end(), theirs.begin());
  return absl::OkStatus();
}

absl::Status GrpcPeerClient::SendSegment(int peer, uint64_t iteration,
                                         int round, FlatRange range,
                                         absl::Span<const float> values) {
  ASGD_RETURN_IF_ERROR(CheckPeer(peer));
  if (static_cast<int64_t>(values.size()) != range.size() || range.begin < 0 ||
      range.end > layout_->total_size()) {
    return absl::InvalidArgumentError("allreduce segment out of range");
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx, absl::Now() + options_.send_timeout);
  asgd::v1::ReduceAck ack;
  auto writer = stubs_[peer]->Reduce(&ctx, &ack);
  PeerHeader header;
  header.set_worker_index(worker_index());
  header.set_layout_fingerprint(options_.group.layout_fingerprint);
  header.set_step(iteration);
  header.set_round(round);
  const OutgoingTransfer out(layout_, std::move(header), range, values.data(),
                             options_.max_chunk_elements);
  PeerMessage msg;
  bool ok = true;
  for (size_t i = 0; ok && i < out.num_messages(); ++i) {
    out.Fill(i, &msg);
    ok = writer->Write(msg);
  }
  if (ok) writer->WritesDone();
  return WithPeer(peer, FromGrpcStatus(writer->Finish()));
}

std::vector<int> GrpcPeerClient::AwaitPeersDone(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto await = [this, deadline](int p) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, deadline);
    asgd::v1::AwaitDoneRequest request;
    request.set_worker_index(worker_index());
    asgd::v1::AwaitDoneReply reply;
    const grpc::Status s = stubs_[p]->AwaitDone(&ctx, request, &reply);
    // Any answer but the deadline means the peer trains no more: done, or
    // gone (it may have passed the barrier and shut down a moment ago, or
    // failed), so it has nothing left to average.
    return s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
  };
  std::vector<std::pair<int, std::future<bool>>> calls;
  for (int p = 0; p < num_workers(); ++p) {
    if (p != worker_index()) {
      calls.emplace_back(p, std::async(std::launch::async, await, p));
    }
  }
  std::vector<int> missing;
  for (auto& [p, call] : calls) {
    if (!call.get()) missing.push_back(p);
  }
  return missing;
}

}  // namespace asgd
