// ServerMetrics: the Prometheus metrics of one asgd_server process (names and
// meanings in docs/metrics.md). Every family and every fixed-label series is
// built once in the constructor; the hot path only increments cached
// references. Labels are bounded: server and shard indices, a fixed reason
// set, the service's four methods, gRPC's status codes, and the ids of the
// workers active lately: a worker's series goes away once it has not pushed
// for worker_series_expiry, and at most max_worker_series exist (the least
// recently seen worker's goes first), whatever ids clients send.
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic; the
// per-worker and per-code series are created under a mutex on first use).
#ifndef ASGD_SERVER_SERVER_METRICS_H_
#define ASGD_SERVER_SERVER_METRICS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "common/wire_codec.h"
#include "server/param_store.h"

namespace asgd {

enum class RpcMethod {
  kDescribeModel = 0,
  kFetchBatches,
  kPushStream,
  kPullStream,
  kCount
};

struct ServerMetricsOptions {
  absl::Duration worker_series_expiry = absl::Minutes(10);
  int max_worker_series = 1024;
  std::function<absl::Time()> clock;  // null: absl::Now
};

class ServerMetrics final : public StoreObserver {
 public:
  ServerMetrics(prometheus::Registry& registry, int server_index,
                int num_shards, ServerMetricsOptions options = {});

  // StoreObserver.
  void OnPushAccepted(uint64_t worker_id, uint64_t staleness) override;
  void OnPushApplied(uint64_t worker_id, uint64_t version) override;
  void OnPushRejected(RejectReason reason) override;
  void OnShardApplied(int shard, double seconds) override;
  void OnDcBackupMiss() override { dc_backup_misses_.Increment(); }
  void OnUpdateClipped() override { updates_clipped_.Increment(); }

  // RPC level (called by the gRPC adapter).
  void OnRpcStarted(RpcMethod method);
  // `code` is a gRPC status code number (0-16).
  void OnRpcHandled(RpcMethod method, int code, double seconds);
  void OnBytesReceived(int64_t bytes) { received_bytes_.Increment(bytes); }
  // A push began on a PushStream (a Push call counts at OnRpcStarted).
  void OnPushStarted() { pushes_received_.Increment(); }
  // A push arrived whole (its commit), encoded as `encoding`, with
  // `wire_bytes` bytes of chunk data.
  void OnPushCommitted(PushEncoding encoding, int64_t wire_bytes);
  void OnBytesSent(int64_t bytes) { sent_bytes_.Increment(bytes); }
  void OnPull() { pulls_.Increment(); }
  // What one pull sent: the weights (read while updates were applied), the
  // weights taken at one version for a delta pull (then the updates since),
  // or the updates since the worker's exact copy (delta pull).
  enum class PullForm { kWeights = 0, kExactWeights, kUpdates, kCount };
  void OnPullForm(PullForm form) {
    pulls_by_form_[static_cast<int>(form)]->Increment();
  }
  void OnCheckpoint(absl::Time when);

  // Workers with a series now.
  int worker_series() const;

 private:
  static constexpr int kNumCodes = 17;
  absl::Time Now() const;
  void RefreshConnectedWorkers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the series of workers not seen for the expiry (at most once a
  // second) and, beyond the cap, of the least recently seen ones.
  void ExpireWorkers(absl::Time now, size_t room_for)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerMetricsOptions options_;

  prometheus::Gauge& version_;
  prometheus::Family<prometheus::Counter>& shard_updates_family_;
  std::vector<prometheus::Counter*> shard_updates_;
  prometheus::Counter& pushes_received_;
  prometheus::Counter& pushes_applied_;
  std::array<prometheus::Counter*, static_cast<int>(RejectReason::kCount)> dropped_;
  prometheus::Histogram& staleness_;
  std::vector<prometheus::Histogram*> apply_seconds_;
  prometheus::Counter& received_bytes_;
  prometheus::Counter& sent_bytes_;
  prometheus::Counter& pulls_;
  std::array<prometheus::Counter*, static_cast<int>(PullForm::kCount)>
      pulls_by_form_{};
  prometheus::Gauge& connected_workers_;
  prometheus::Family<prometheus::Gauge>& last_push_family_;
  prometheus::Gauge& last_checkpoint_;
  prometheus::Counter& dc_backup_misses_;
  prometheus::Counter& updates_clipped_;
  std::array<prometheus::Counter*, kNumPushEncodings> pushes_by_encoding_{};
  std::array<prometheus::Counter*, kNumPushEncodings> bytes_by_encoding_{};
  prometheus::Family<prometheus::Counter>& rpc_started_family_;
  prometheus::Family<prometheus::Counter>& rpc_handled_family_;
  prometheus::Family<prometheus::Histogram>& rpc_seconds_family_;
  std::array<prometheus::Counter*, static_cast<int>(RpcMethod::kCount)> rpc_started_;
  std::array<prometheus::Histogram*, static_cast<int>(RpcMethod::kCount)> rpc_seconds_;

  mutable absl::Mutex mu_;
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::array<std::array<prometheus::Counter*, kNumCodes>,
             static_cast<int>(RpcMethod::kCount)>
      rpc_handled_ ABSL_GUARDED_BY(mu_){};
  struct WorkerSeries {
    prometheus::Gauge* last_push = nullptr;
    absl::Time last_seen;
  };
  absl::flat_hash_map<uint64_t, WorkerSeries> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace asgd

#endif  // ASGD_SERVER_SERVER_METRICS_H_
