#include "server/server_metrics.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace asgd {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

const char* MethodName(RpcMethod m) {
  switch (m) {
    case RpcMethod::kDescribeModel: return "DescribeModel";
    case RpcMethod::kFetchBatches: return "FetchBatches";
    case RpcMethod::kPushStream: return "PushStream";
    case RpcMethod::kPullStream: return "PullStream";
    case RpcMethod::kCount: break;
  }
  return "unknown";
}

const char* CodeName(int code) {
  static const char* const kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "UNKNOWN";
}

Histogram::BucketBoundaries StalenessBuckets() {
  return {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256};
}

Histogram::BucketBoundaries SecondsBuckets() {
  return {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10};
}

}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& r, int server_index,
                             int num_shards, ServerMetricsOptions options)
    : options_(std::move(options)),
      version_(BuildGauge()
                   .Name("asgd_server_model_version")
                   .Help("Pushes every shard of this server has applied.")
                   .Labels({{"server", absl::StrCat(server_index)}})
                   .Register(r)
                   .Add({})),
      shard_updates_family_(
          BuildCounter()
              .Name("asgd_server_shard_updates_total")
              .Help("Updates applied by one shard's apply thread.")
              .Labels({{"server", absl::StrCat(server_index)}})
              .Register(r)),
      pushes_received_(BuildCounter()
                           .Name("asgd_server_pushes_received_total")
                           .Help("Pushes started: Push calls, and pushes "
                                 "begun on a PushStream.")
                           .Labels({{"server", absl::StrCat(server_index)}})
                           .Register(r)
                           .Add({})),
      pushes_applied_(BuildCounter()
                          .Name("asgd_server_pushes_applied_total")
                          .Help("Pushes applied to every shard.")
                          .Labels({{"server", absl::StrCat(server_index)}})
                          .Register(r)
                          .Add({})),
      staleness_(BuildHistogram()
                     .Name("asgd_server_push_staleness")
                     .Help("Versions between a push's base model and the "
                           "server's version when it arrived.")
                     .Labels({{"server", absl::StrCat(server_index)}})
                     .Register(r)
                     .Add({}, StalenessBuckets())),
      received_bytes_(BuildCounter()
                          .Name("asgd_server_received_bytes_total")
                          .Help("Tensor bytes received in pushes.")
                          .Labels({{"server", absl::StrCat(server_index)}})
                          .Register(r)
                          .Add({})),
      sent_bytes_(BuildCounter()
                      .Name("asgd_server_sent_bytes_total")
                      .Help("Tensor bytes sent in pulls.")
                      .Labels({{"server", absl::StrCat(server_index)}})
                      .Register(r)
                      .Add({})),
      pulls_(BuildCounter()
                 .Name("asgd_server_pulls_total")
                 .Help("Pulls served.")
                 .Labels({{"server", absl::StrCat(server_index)}})
                 .Register(r)
                 .Add({})),
      connected_workers_(BuildGauge()
                             .Name("asgd_server_connected_workers")
                             .Help("Workers that pushed in the last 60 s.")
                             .Labels({{"server", absl::StrCat(server_index)}})
                             .Register(r)
                             .Add({})),
      last_push_family_(
          BuildGauge()
              .Name("asgd_server_worker_last_push_timestamp_seconds")
              .Help("Unix time of each worker's last applied push.")
              .Labels({{"server", absl::StrCat(server_index)}})
              .Register(r)),
      last_checkpoint_(
          BuildGauge()
              .Name("asgd_server_last_checkpoint_timestamp_seconds")
              .Help("Unix time of the last checkpoint (0: none yet).")
              .Labels({{"server", absl::StrCat(server_index)}})
              .Register(r)
              .Add({})),
      dc_backup_misses_(
          BuildCounter()
              .Name("asgd_server_dc_backup_misses_total")
              .Help("DC-ASGD pushes applied without delay compensation: the "
                    "worker's model copy was not kept (memory budget).")
              .Labels({{"server", absl::StrCat(server_index)}})
              .Register(r)
              .Add({})),
      updates_clipped_(
          BuildCounter()
              .Name("asgd_server_updates_clipped_total")
              .Help("Updates whose step was scaled down to --max_change (a "
                    "gradient far larger than training produces).")
              .Labels({{"server", absl::StrCat(server_index)}})
              .Register(r)
              .Add({})),
      rpc_started_family_(BuildCounter()
                              .Name("asgd_grpc_server_started_total")
                              .Help("RPCs started, by method.")
                              .Register(r)),
      rpc_handled_family_(BuildCounter()
                              .Name("asgd_grpc_server_handled_total")
                              .Help("RPCs finished, by method and status code.")
                              .Register(r)),
      rpc_seconds_family_(BuildHistogram()
                              .Name("asgd_grpc_server_handling_seconds")
                              .Help("RPC latency, by method.")
                              .Register(r)) {
  auto& dropped_family =
      BuildCounter()
          .Name("asgd_server_pushes_dropped_total")
          .Help("Pushes not applied, by reason.")
          .Labels({{"server", absl::StrCat(server_index)}})
          .Register(r);
  for (int i = 0; i < static_cast<int>(RejectReason::kCount); ++i) {
    dropped_[i] = &dropped_family.Add(
        {{"reason", RejectReasonName(static_cast<RejectReason>(i))}});
  }
  auto& pull_form_family =
      BuildCounter()
          .Name("asgd_server_pulls_by_form_total")
          .Help("Pulls served, by what they sent: weights, exact_weights (a "
                "delta pull's consistent weights and the updates since) or "
                "updates (a delta pull's updates only).")
          .Labels({{"server", absl::StrCat(server_index)}})
          .Register(r);
  const char* const kPullForms[] = {"weights", "exact_weights", "updates"};
  for (int f = 0; f < static_cast<int>(PullForm::kCount); ++f) {
    pulls_by_form_[f] = &pull_form_family.Add({{"form", kPullForms[f]}});
  }
  auto& by_encoding_family =
      BuildCounter()
          .Name("asgd_server_pushes_by_encoding_total")
          .Help("Pushes received whole (up to their commit), by the "
                "encoding of their gradient on the wire.")
          .Labels({{"server", absl::StrCat(server_index)}})
          .Register(r);
  auto& bytes_family =
      BuildCounter()
          .Name("asgd_server_push_wire_bytes_total")
          .Help("Chunk data bytes of the pushes received whole, by encoding.")
          .Labels({{"server", absl::StrCat(server_index)}})
          .Register(r);
  for (int e = 0; e < kNumPushEncodings; ++e) {
    const std::string name(PushEncodingName(static_cast<PushEncoding>(e)));
    pushes_by_encoding_[e] = &by_encoding_family.Add({{"encoding", name}});
    bytes_by_encoding_[e] = &bytes_family.Add({{"encoding", name}});
  }
  auto& apply_family = BuildHistogram()
                           .Name("asgd_server_apply_duration_seconds")
                           .Help("Time one shard took to apply one update.")
                           .Labels({{"server", absl::StrCat(server_index)}})
                           .Register(r);
  for (int k = 0; k < num_shards; ++k) {
    const std::string shard = absl::StrCat(k);
    shard_updates_.push_back(&shard_updates_family_.Add({{"shard", shard}}));
    apply_seconds_.push_back(
        &apply_family.Add({{"shard", shard}}, SecondsBuckets()));
  }
  for (int m = 0; m < static_cast<int>(RpcMethod::kCount); ++m) {
    const char* name = MethodName(static_cast<RpcMethod>(m));
    rpc_started_[m] = &rpc_started_family_.Add({{"method", name}});
    rpc_seconds_[m] = &rpc_seconds_family_.Add({{"method", name}}, SecondsBuckets());
    rpc_handled_[m][0] = &rpc_handled_family_.Add({{"method", name}, {"code", "OK"}});
  }
}

void ServerMetrics::OnPushAccepted(uint64_t /*worker_id*/, uint64_t staleness) {
  staleness_.Observe(static_cast<double>(staleness));
}

absl::Time ServerMetrics::Now() const {
  return options_.clock ? options_.clock() : absl::Now();
}

void ServerMetrics::OnPushApplied(uint64_t worker_id, uint64_t version) {
  pushes_applied_.Increment();
  version_.Set(static_cast<double>(version));
  const absl::Time now = Now();
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    ExpireWorkers(now, 1);
    it = workers_.emplace(worker_id, WorkerSeries{}).first;
    it->second.last_push =
        &last_push_family_.Add({{"worker", absl::StrCat(worker_id)}});
  } else {
    ExpireWorkers(now, 0);
  }
  it->second.last_push->Set(absl::ToUnixSeconds(now));
  it->second.last_seen = now;
  RefreshConnectedWorkers(now);
}

void ServerMetrics::ExpireWorkers(absl::Time now, size_t room_for) {
  if (now - last_sweep_ >= absl::Seconds(1)) {
    last_sweep_ = now;
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (now - it->second.last_seen > options_.worker_series_expiry) {
        last_push_family_.Remove(it->second.last_push);
        workers_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  const size_t cap =
      static_cast<size_t>(std::max(options_.max_worker_series, 1));
  while (!workers_.empty() && workers_.size() + room_for > cap) {
    auto oldest = workers_.begin();
    for (auto it = workers_.begin(); it != workers_.end(); ++it) {
      if (it->second.last_seen < oldest->second.last_seen) oldest = it;
    }
    last_push_family_.Remove(oldest->second.last_push);
    workers_.erase(oldest);
  }
}

int ServerMetrics::worker_series() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

void ServerMetrics::RefreshConnectedWorkers(absl::Time now) {
  int connected = 0;
  for (const auto& [id, w] : workers_) connected += now - w.last_seen < absl::Seconds(60);
  connected_workers_.Set(connected);
}

void ServerMetrics::OnPushRejected(RejectReason reason) {
  const int i = static_cast<int>(reason);
  if (i >= 0 && i < static_cast<int>(RejectReason::kCount)) dropped_[i]->Increment();
}

void ServerMetrics::OnShardApplied(int shard, double seconds) {
  if (shard < 0 || shard >= static_cast<int>(shard_updates_.size())) return;
  shard_updates_[shard]->Increment();
  apply_seconds_[shard]->Observe(seconds);
}

void ServerMetrics::OnRpcStarted(RpcMethod method) {
  rpc_started_[static_cast<int>(method)]->Increment();
}

void ServerMetrics::OnRpcHandled(RpcMethod method, int code, double seconds) {
  const int m = static_cast<int>(method);
  if (code < 0 || code >= kNumCodes) code = 2;  // UNKNOWN
  rpc_seconds_[m]->Observe(seconds);
  prometheus::Counter* counter;
  {
    absl::MutexLock lock(&mu_);
    counter = rpc_handled_[m][code];
    if (counter == nullptr) {
      counter = rpc_handled_[m][code] = &rpc_handled_family_.Add(
          {{"method", MethodName(method)}, {"code", CodeName(code)}});
    }
  }
  counter->Increment();
}

void ServerMetrics::OnPushCommitted(PushEncoding encoding,
                                    int64_t wire_bytes) {
  const int e = static_cast<int>(encoding);
  if (e < 0 || e >= kNumPushEncodings) return;
  pushes_by_encoding_[e]->Increment();
  bytes_by_encoding_[e]->Increment(static_cast<double>(wire_bytes));
}

void ServerMetrics::OnCheckpoint(absl::Time when) {
  last_checkpoint_.Set(absl::ToUnixSeconds(when));
}

}  // namespace asgd
