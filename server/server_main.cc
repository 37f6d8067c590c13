// asgd_server: one process of the parameter-server pool.
//
//   asgd_server --server_index=0 --num_servers=2 --num_shards=2 --port=0
//
// Prints "asgd_server <i>/<n> listening on <host>:<port>" once it serves, a
// status line every --log_every_s seconds, and shuts down cleanly (draining
// the shard queues) on SIGINT or SIGTERM.
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/freed_memory.h"
#include "common/main_preamble.h"
#include "common/security_flags.h"
#include "common/status_macros.h"
#include "model/model_file.h"
#include "model/model_presets.h"
#include "model/prune_mask.h"
#include "model/model_spec.h"
#include "model/model_spec_proto.h"
#include "server/checkpoint.h"
#include "server/grpc_server.h"
#include "server/health_probe.h"
#include "server/model_options.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on.");
ABSL_FLAG(int, port, 50051, "Port to listen on; 0 picks a free port (printed).");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the chosen port to this file once serving.");
ABSL_FLAG(int, server_index, 0, "This process's index in the pool [0, num_servers).");
ABSL_FLAG(int, num_servers, 1, "Number of server processes in the pool.");
ABSL_FLAG(int, num_shards, 2,
          "Shards in this process, each with one apply thread.");
ABSL_FLAG(std::string, model, "dnn",
          "The model kind: dnn, cnn, lstm or blstm, shaped by the flags "
          "below (see model/model_presets.h); --model_config for anything "
          "else.");
ABSL_FLAG(std::string, model_config, "",
          "A model config file (protobuf text of asgd.v1.ModelSpec, see "
          "proto/model.proto): any layer graph. Replaces --model and the "
          "shape flags.");
ABSL_FLAG(std::string, init_model, "",
          "Start from this saved model (a worker's --save_model, asgd_shrink's "
          "output): its layers replace the model flags above and its weights "
          "the --seed initialization (a checkpoint in --checkpoint_dir still "
          "wins). Every server of the pool needs the same file.");
ABSL_FLAG(int, feature_dim, 40, "Features per frame (40 log-mel bins).");
ABSL_FLAG(int, context, -1,
          "Frames of context on each side stacked into one input row "
          "(-1: 5 for dnn and cnn, 0 for lstm and blstm).");
ABSL_FLAG(int, num_classes, 40, "Output classes (frame labels).");
ABSL_FLAG(std::string, hidden, "auto",
          "Dense layer sizes, comma-separated (\"\": none; auto: 512,512 "
          "for dnn, 512 for cnn, none for lstm and blstm); for cnn, lstm and "
          "blstm they follow the conv or LSTM layers.");
ABSL_FLAG(std::string, activation, "relu",
          "Activation of dense and conv layers: relu, sigmoid or tanh.");
ABSL_FLAG(int, conv_filters, 32,
          "cnn: filters of the first conv layer (3x8 over time x frequency, "
          "max-pool 1x3); the second has twice as many (3x4).");
ABSL_FLAG(int, lstm_layers, 2, "lstm, blstm: LSTM layers.");
ABSL_FLAG(int, lstm_cells, 256, "lstm, blstm: cells per LSTM (per direction).");
ABSL_FLAG(int, lstm_projection, 0,
          "lstm, blstm: recurrent projection size (0: none).");
ABSL_FLAG(double, cell_clip, 0,
          "lstm, blstm: clip LSTM cell values to +-this (0: no clipping).");
ABSL_FLAG(int, output_frames, 1,
          "dnn, cnn: softmax heads, head j predicting the label of the "
          "row's frame + j (a multi-frame model: decoding computes every "
          "k-th frame; 1 to 16). Trains on the CPU backend.");
ABSL_FLAG(double, learning_rate, 0.05, "Server-side learning rate.");
ABSL_FLAG(double, momentum, 0.0, "Momentum in [0, 1); 0 is plain SGD.");
ABSL_FLAG(bool, nesterov, false,
          "Nesterov-style momentum (gradient projection); needs --momentum.");
ABSL_FLAG(double, weight_decay, 0.0,
          "Gradient decay applied on the server: g += weight_decay * w.");
ABSL_FLAG(double, dc_lambda, 0.0,
          "DC-ASGD delay compensation strength (0: off). The server keeps "
          "each worker's last pulled model to compensate its gradient.");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "Learning-rate schedule over server steps: constant, step "
          "(lr * gamma^floor(t/step_size)) or exponential "
          "(lr * gamma^(t/step_size)).");
ABSL_FLAG(int64_t, lr_step_size, 1000, "Schedule period in server steps.");
ABSL_FLAG(double, lr_gamma, 0.5, "Schedule decay factor in (0, 1].");
ABSL_FLAG(std::string, minibatch_lr_scale, "linear",
          "Learning-rate multiplier for a push averaging k minibatches "
          "(--push_every on the worker): none, linear (k) or sqrt.");
ABSL_FLAG(std::string, staleness_lr_scale, "none",
          "Learning-rate multiplier for a push of staleness s: none, inverse "
          "(1/(1+s)) or sqrt (1/sqrt(1+s)).");
ABSL_FLAG(int, sync_workers, 0,
          "Synchronous baseline: wait for one push from each of this many "
          "workers per version and apply their average (0: asynchronous).");
ABSL_FLAG(int, admm_slots, 0,
          "ADMM consensus (asgd_worker --mode=admm): keep this many worker "
          "slots, each its worker's last point, and serve their average as "
          "the model (0: none). Costs this many copies of the server's slice.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory for this server's checkpoints (weights, optimizer state, "
          "version). On start the server restores its checkpoint from here if "
          "there is one, and refuses a corrupt or mismatched one. Empty: none.");
ABSL_FLAG(int, checkpoint_every_s, 60,
          "Seconds between checkpoints (0: only at shutdown); needs "
          "--checkpoint_dir.");
ABSL_FLAG(std::string, health_probe, "",
          "Probe mode: check the gRPC health of the server at HOST:PORT, exit 0 "
          "if SERVING within 3 s, else 1. Starts no server.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the initial weights (same on every server).");
ABSL_FLAG(int, queue_capacity, 32,
          "Pushes admitted but not yet applied before the server answers busy.");
ABSL_FLAG(uint64_t, max_staleness, 0,
          "Drop pushes staler than this many versions and tell the worker to "
          "pull (0: never drop).");
ABSL_FLAG(int, log_every_s, 10, "Seconds between status lines (0: none).");
ABSL_FLAG(int64_t, push_memory_mb, 1024,
          "Memory for pushes in flight (staged or waiting to be applied), in "
          "MiB; must hold one push of this server's slice. A push that finds "
          "it in use is refused at once (UNAVAILABLE, PUSH_MEMORY) and the "
          "worker goes on with its next gradient.");
ABSL_FLAG(double, push_progress_timeout_s, 20,
          "A push stream that receives nothing for this many seconds before "
          "its commit is ended by the server (DEADLINE_EXCEEDED).");
ABSL_FLAG(int, max_pushes_per_peer, 16,
          "Calls of each kind in flight from one client address (IP): pushes "
          "(a PushStream counts as one), pull streams, pulls, and other calls "
          "(DescribeModel, FetchBatches) are counted apart. More are refused "
          "at once (UNAVAILABLE, PEER_LIMIT). 0: no limit.");
ABSL_FLAG(int, max_calls, 512,
          "Calls and streams open on this server from all clients together; "
          "more are refused at once (UNAVAILABLE, SERVER_LIMIT). A call counts "
          "until gRPC has released it. 0: no limit.");
ABSL_FLAG(int, max_calls_per_peer, 128,
          "Calls and streams alive on this server from one client address "
          "(IP), counted as for --max_calls, so that one client (one that "
          "opens and resets calls as fast as it can, say) can not take every "
          "--max_calls place; more are refused at once (UNAVAILABLE, "
          "PEER_LIMIT). 0: no limit.");
ABSL_FLAG(int, max_streams_per_connection, 128,
          "HTTP/2 streams one client connection may have open at once "
          "(gRPC's MAX_CONCURRENT_STREAMS).");
ABSL_FLAG(int64_t, grpc_memory_mb, 2048,
          "gRPC's resource quota, in MiB: the memory its transport may take "
          "for reading and buffering calls.");
ABSL_FLAG(double, max_change, 1.0,
          "The most one update may move any weight by its gradient: learning "
          "rate (with the minibatch and staleness scales) times the largest "
          "|gradient value|. A larger update is scaled down to it (and "
          "counted in asgd_server_updates_clipped_total). Honest training "
          "stays far below (the server's final line reports the largest "
          "step seen); a gradient of garbage does not. 0: no bound.");
ABSL_FLAG(double, stream_idle_timeout_s, 120,
          "A worker's long-lived push or pull stream with nothing under way "
          "for this many seconds is closed (the worker opens a new one when "
          "it needs it).");
ABSL_FLAG(bool, compressed_pushes, true,
          "Accept compressed gradient pushes (1-bit and top-k, see the "
          "worker's --push_encoding); false: float32 and bfloat16 only.");
ABSL_FLAG(int, max_push_minibatches, 64,
          "The most minibatches one push may average (the server scales its "
          "step by the count); a push asking for more is refused.");
ABSL_FLAG(int64_t, dc_memory_mb, 1024,
          "With --dc_lambda: memory for the workers' model copies, in MiB. "
          "The copy of the worker that pulled least recently is dropped to "
          "make room; a push without its copy is applied uncompensated.");
ABSL_FLAG(int64_t, delta_log_mb, 64,
          "Memory for the recent compressed updates that delta pulls send "
          "instead of the weights, in MiB (with plain SGD, no --momentum or "
          "--dc_lambda, asynchronous): a worker whose copy is older than the "
          "log gets the weights. 0: no delta pulls.");
ABSL_FLAG(int64_t, delta_base_mb, 1024,
          "Memory for the consistent copies of the weights that delta pulls "
          "start from, in MiB; beyond it a delta pull gets plain weights.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) { return ReportFailure("asgd_server", s, 2); }

// --health_probe: asks a running server's health service, as a client
// would (--tls_ca, and --tls_cert, --tls_key for mutual TLS,
// --tls_server_name when the server uses TLS); the exit status says.
int RunHealthProbe(const std::string& probe) {
  auto security = SecurityOptionsFromFlags();
  absl::Status s = security.ok()
                       ? ProbeHealth(probe, absl::Seconds(3), *security)
                       : security.status();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%s SERVING\n", probe.c_str());
  return 0;
}

// A preset shaped by the model flags.
absl::StatusOr<ModelSpec> PresetFromFlags() {
  ModelShapeOptions shape;
  shape.kind = absl::GetFlag(FLAGS_model);
  shape.feature_dim = absl::GetFlag(FLAGS_feature_dim);
  shape.context = absl::GetFlag(FLAGS_context);
  shape.num_classes = absl::GetFlag(FLAGS_num_classes);
  shape.hidden = absl::GetFlag(FLAGS_hidden);
  shape.activation = absl::GetFlag(FLAGS_activation);
  shape.conv_filters = absl::GetFlag(FLAGS_conv_filters);
  shape.lstm_layers = absl::GetFlag(FLAGS_lstm_layers);
  shape.lstm_cells = absl::GetFlag(FLAGS_lstm_cells);
  shape.lstm_projection = absl::GetFlag(FLAGS_lstm_projection);
  shape.cell_clip = static_cast<float>(absl::GetFlag(FLAGS_cell_clip));
  shape.output_frames = absl::GetFlag(FLAGS_output_frames);
  return PresetModel(shape);
}

// The model and its initial weights: --init_model's, or --model_config or a
// preset shaped by the flags, initialized from --seed.
absl::StatusOr<SavedModel> ModelFromFlags() {
  const std::string config = absl::GetFlag(FLAGS_model_config);
  if (const std::string file = absl::GetFlag(FLAGS_init_model);
      !file.empty()) {
    if (!config.empty()) {
      return absl::InvalidArgumentError(
          "--init_model and --model_config both give the model; keep one");
    }
    return LoadModel(file);
  }
  SavedModel model;
  if (!config.empty()) {
    ASGD_ASSIGN_OR_RETURN(model.spec, ReadModelConfig(config));
  } else {
    ASGD_ASSIGN_OR_RETURN(model.spec, PresetFromFlags());
  }
  model.params = InitialParams(model.spec, absl::GetFlag(FLAGS_seed));
  return model;
}

// The store's training options (optimizer, schedule, scales) from the flags.
absl::Status TrainingOptionsFromFlags(ParamStoreOptions* options) {
  options->server_index = absl::GetFlag(FLAGS_server_index);
  options->num_servers = absl::GetFlag(FLAGS_num_servers);
  options->num_shards = absl::GetFlag(FLAGS_num_shards);
  options->optimizer.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  options->optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  options->optimizer.nesterov = absl::GetFlag(FLAGS_nesterov);
  options->optimizer.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  options->optimizer.dc_lambda = absl::GetFlag(FLAGS_dc_lambda);
  options->optimizer.step_size = absl::GetFlag(FLAGS_lr_step_size);
  options->optimizer.gamma = absl::GetFlag(FLAGS_lr_gamma);
  options->sync_workers = absl::GetFlag(FLAGS_sync_workers);
  options->admm_slots = absl::GetFlag(FLAGS_admm_slots);
  auto schedule = ParseLrSchedule(absl::GetFlag(FLAGS_lr_schedule));
  if (!schedule.ok()) return schedule.status();
  options->optimizer.schedule = *schedule;
  auto mb_scale = ParseMinibatchLrScale(absl::GetFlag(FLAGS_minibatch_lr_scale));
  if (!mb_scale.ok()) return mb_scale.status();
  options->minibatch_lr_scale = *mb_scale;
  auto st_scale = ParseStalenessLrScale(absl::GetFlag(FLAGS_staleness_lr_scale));
  if (!st_scale.ok()) return st_scale.status();
  options->staleness_lr_scale = *st_scale;
  options->queue_capacity = absl::GetFlag(FLAGS_queue_capacity);
  options->max_staleness = absl::GetFlag(FLAGS_max_staleness);
  options->max_push_minibatches = absl::GetFlag(FLAGS_max_push_minibatches);
  return absl::OkStatus();
}

// The bounds (memory, timeouts, calls) from the flags, checked, into the
// store's and the service's options.
absl::Status LimitsFromFlags(ParamStoreOptions* options,
                             GrpcServiceOptions* service_options) {
  const int64_t push_memory_mb = absl::GetFlag(FLAGS_push_memory_mb);
  const int64_t dc_memory_mb = absl::GetFlag(FLAGS_dc_memory_mb);
  const int64_t delta_log_mb = absl::GetFlag(FLAGS_delta_log_mb);
  const int64_t delta_base_mb = absl::GetFlag(FLAGS_delta_base_mb);
  const double progress_s = absl::GetFlag(FLAGS_push_progress_timeout_s);
  const double idle_s = absl::GetFlag(FLAGS_stream_idle_timeout_s);
  if (push_memory_mb < 1 || push_memory_mb > (int64_t{1} << 30) ||
      dc_memory_mb < 0 || dc_memory_mb > (int64_t{1} << 30) ||
      delta_log_mb < 0 || delta_log_mb > (int64_t{1} << 30) ||
      delta_base_mb < 0 || delta_base_mb > (int64_t{1} << 30) ||
      !(progress_s > 0 && progress_s <= 86400) ||
      !(idle_s > 0 && idle_s <= 86400) ||
      absl::GetFlag(FLAGS_max_pushes_per_peer) < 0) {
    return absl::InvalidArgumentError(
        "--push_memory_mb must be >= 1, --dc_memory_mb, --delta_log_mb and "
        "--delta_base_mb >= 0, "
        "--push_progress_timeout_s and --stream_idle_timeout_s in (0, 86400] "
        "and --max_pushes_per_peer >= 0");
  }
  const double max_change = absl::GetFlag(FLAGS_max_change);
  const int64_t grpc_memory_mb = absl::GetFlag(FLAGS_grpc_memory_mb);
  if (!(max_change >= 0 && std::isfinite(max_change)) ||
      absl::GetFlag(FLAGS_max_calls) < 0 ||
      absl::GetFlag(FLAGS_max_calls_per_peer) < 0 ||
      absl::GetFlag(FLAGS_max_streams_per_connection) < 1 ||
      grpc_memory_mb < 64 || grpc_memory_mb > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        "--max_change must be finite and >= 0, --max_calls and "
        "--max_calls_per_peer >= 0, "
        "--max_streams_per_connection >= 1 and --grpc_memory_mb >= 64");
  }
  options->max_change = max_change;
  options->compressed_pushes = absl::GetFlag(FLAGS_compressed_pushes);
  options->push_memory_bytes = push_memory_mb << 20;
  options->dc_memory_bytes = dc_memory_mb << 20;
  options->delta_log_bytes = delta_log_mb << 20;
  service_options->max_delta_base_mb = delta_base_mb;
  service_options->push_progress_timeout = absl::Seconds(progress_s);
  service_options->stream_idle_timeout = absl::Seconds(idle_s);
  service_options->max_pushes_per_peer =
      absl::GetFlag(FLAGS_max_pushes_per_peer);
  service_options->max_calls = absl::GetFlag(FLAGS_max_calls);
  service_options->max_calls_per_peer =
      absl::GetFlag(FLAGS_max_calls_per_peer);
  service_options->max_streams_per_connection =
      absl::GetFlag(FLAGS_max_streams_per_connection);
  service_options->grpc_memory_bytes = grpc_memory_mb << 20;
  return absl::OkStatus();
}

// The checkpoint an earlier run of this server left in `dir`, if any (none
// when `dir` is empty).
absl::StatusOr<std::optional<StoreSnapshot>> RestoreCheckpoint(
    const std::string& dir, const ParamStoreOptions& options) {
  if (dir.empty()) return std::optional<StoreSnapshot>();
  ASGD_RETURN_IF_ERROR(PrepareCheckpointDir(dir));
  auto layout = ModelLayout::Create(options.tensors, options.num_servers,
                                    options.num_shards, options.model_id);
  if (!layout.ok()) return layout.status();
  auto read = ReadCheckpoint(dir, *layout, options.server_index,
                             options.optimizer.momentum > 0);
  if (!read.ok()) return read.status();
  return std::optional<StoreSnapshot>(*std::move(read));
}

// The lines that say the server is up (and where its metrics are).
void PrintStarted(const ParamStoreOptions& options, const ModelSpec& spec,
                  const ParamStore& store, int port,
                  const ProcessMetrics& metrics) {
  const ModelLayout& layout = store.layout();
  std::printf(
      "asgd_server %d/%d listening on %s:%d (model %s, %lld params, this "
      "server %lld in %d shards, fingerprint %s)\n",
      options.server_index, options.num_servers,
      absl::GetFlag(FLAGS_host).c_str(), port, DescribeModel(spec).c_str(),
      static_cast<long long>(layout.total_size()),
      static_cast<long long>(store.range().size()), options.num_shards,
      layout.Fingerprint().c_str());
  if (options.admm_slots > 0) {
    std::printf("asgd_server %d keeps %d ADMM slots (%.1f MB)\n",
                options.server_index, options.admm_slots,
                options.admm_slots * store.range().size() * 4.0 / 1e6);
  }
  std::fflush(stdout);
  if (metrics.serving()) {
    std::printf("asgd_server %d metrics on %s\n", options.server_index,
                metrics.url().c_str());
  }
}

// Writes one checkpoint of `store`; a failure is reported and training goes
// on (the next checkpoint tries again).
void WriteOneCheckpoint(const std::string& dir, int server_index,
                        ParamStore* store, ServerMetrics* metrics) {
  const absl::Time start = absl::Now();
  auto snapshot = store->TakeSnapshot();
  absl::Status s = snapshot.status();
  if (s.ok()) {
    s = WriteCheckpoint(dir, store->layout(), server_index, *snapshot);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "asgd_server %d: checkpoint failed: %s\n",
                 server_index, s.ToString().c_str());
    return;
  }
  metrics->OnCheckpoint(absl::Now());
  std::printf("asgd_server %d: checkpoint at version %llu (%.0f ms)\n",
              server_index, static_cast<unsigned long long>(snapshot->version),
              absl::ToDoubleMilliseconds(absl::Now() - start));
  std::fflush(stdout);
}

// One status line.
void PrintStatus(const ParamStore& store, int server_index) {
  const ParamStoreStats st = store.stats();
  uint64_t rejected = 0;
  for (uint64_t r : st.rejected) rejected += r;
  std::printf(
      "asgd_server %d: version %llu, pushes applied %llu, dropped stale "
      "%llu, rejected %llu, pulls %llu (%llu as updates), staged "
      "%.1f of %lld MiB\n",
      server_index, static_cast<unsigned long long>(store.version()),
      static_cast<unsigned long long>(st.pushes_applied),
      static_cast<unsigned long long>(st.pushes_dropped_stale),
      static_cast<unsigned long long>(rejected),
      static_cast<unsigned long long>(st.pulls),
      static_cast<unsigned long long>(st.update_pulls),
      st.staging_bytes / double(1 << 20),
      static_cast<long long>(st.staging_bytes_max >> 20));
  std::fflush(stdout);
}

// Waits for SIGINT or SIGTERM (blocked in main() before any thread started),
// waking up to print status every `log_every` seconds, to run `checkpoint`
// every `checkpoint_every` seconds (0: never), and every few seconds to give
// memory freed after a burst of calls back to the system (freed_memory.h).
void ServeUntilSignal(const ParamStore& store, int server_index, int log_every,
                      int checkpoint_every,
                      const std::function<void()>& checkpoint) {
  absl::Time next_checkpoint = absl::Now() + absl::Seconds(checkpoint_every);
  absl::Time next_log = absl::Now() + absl::Seconds(log_every);
  constexpr absl::Duration kTrimEvery = absl::Seconds(2);
  FreedMemoryReturner returner(int64_t{64} << 20);
  absl::Time next_trim = absl::Now() + kTrimEvery;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  for (;;) {
    absl::Time wake = next_trim;
    if (log_every > 0) wake = std::min(wake, next_log);
    if (checkpoint_every > 0) wake = std::min(wake, next_checkpoint);
    const timespec timeout =
        absl::ToTimespec(std::max(wake - absl::Now(), absl::Milliseconds(1)));
    const int sig = sigtimedwait(&set, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM) {
      std::printf("asgd_server %d: signal %d, shutting down\n", server_index,
                  sig);
      return;
    }
    if (checkpoint_every > 0 && absl::Now() >= next_checkpoint) {
      checkpoint();
      next_checkpoint = absl::Now() + absl::Seconds(checkpoint_every);
    }
    if (log_every > 0 && absl::Now() >= next_log) {
      next_log = absl::Now() + absl::Seconds(log_every);
      PrintStatus(store, server_index);
    }
    if (absl::Now() >= next_trim) {
      next_trim = absl::Now() + kTrimEvery;
      if (const int64_t bytes = returner.MaybeReturn(); bytes > 0) {
        std::printf("asgd_server %d: gave %lld MiB of freed memory (a burst "
                    "of calls, say) back to the system\n",
                    server_index, static_cast<long long>(bytes >> 20));
        std::fflush(stdout);
      }
    }
  }
}

int Run() {
  if (const std::string probe = absl::GetFlag(FLAGS_health_probe);
      !probe.empty()) {
    return RunHealthProbe(probe);
  }
  absl::StatusOr<SavedModel> model = ModelFromFlags();
  if (!model.ok()) return Fail(model.status());
  const ModelSpec* spec = &model->spec;
  ParamStoreOptions options;
  SetModel(*spec, &options);
  if (!model->pruned.empty()) {  // the servers hold the pruned weights at 0
    options.keep = std::make_shared<const std::vector<uint8_t>>(
        KeepMask(*spec, model->params, model->pruned));
    const std::string digest = KeepMaskDigest(*options.keep);
    options.model_id = ModelIdWithMask(options.model_id, digest);
    options.attributes[kPruneMaskAttribute] = digest;
    options.attributes[kPrunedTensorsAttribute] =
        JoinPrunedTensors(model->pruned);
  }
  if (absl::Status s = TrainingOptionsFromFlags(&options); !s.ok()) {
    return Fail(s);
  }
  GrpcServiceOptions service_options;
  if (absl::Status s = LimitsFromFlags(&options, &service_options); !s.ok()) {
    return Fail(s);
  }
  options.attributes["learning_rate"] = absl::StrCat(options.optimizer.learning_rate);
  options.attributes["sync_workers"] = absl::StrCat(options.sync_workers);
  // Metrics first: the store reports into them from its first update.
  ProcessMetrics process_metrics("server");
  ServerMetrics metrics(process_metrics.registry(), options.server_index,
                        options.num_shards);
  if (absl::Status s = process_metrics.Serve(absl::GetFlag(FLAGS_host));
      !s.ok()) {
    return Fail(s);
  }
  auto security = SecurityOptionsFromFlags();
  if (!security.ok()) return Fail(security.status());
  if (!security->token.empty() && security->tls_cert.empty()) {
    std::fprintf(stderr,
                 "asgd_server: warning: --auth_token_file without TLS: "
                 "clients send the token in clear text (they refuse to "
                 "unless started with --allow_cleartext_token)\n");
  }
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  auto restored = RestoreCheckpoint(checkpoint_dir, options);
  if (!restored.ok()) return Fail(restored.status());
  auto server = GrpcServer::Start(
      options, model->params,
      absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_port), &metrics, *security,
      restored->has_value() ? &**restored : nullptr, service_options);
  if (!server.ok()) {
    std::fprintf(stderr, "asgd_server: %s\n",
                 server.status().ToString().c_str());
    return 1;
  }
  ParamStore* store = (*server)->store();
  const int port = (*server)->port();
  PrintStarted(options, *spec, *store, port, process_metrics);
  if (restored->has_value()) {
    std::printf("asgd_server %d: restored checkpoint %s at version %llu\n",
                options.server_index,
                CheckpointPath(checkpoint_dir, options.server_index,
                               options.num_servers)
                    .c_str(),
                static_cast<unsigned long long>((*restored)->version));
  } else if (const std::string file = absl::GetFlag(FLAGS_init_model);
             !file.empty()) {
    std::printf("asgd_server %d: initial weights from %s\n",
                options.server_index, file.c_str());
  }
  if (options.keep != nullptr) {
    std::printf("asgd_server %d: pruned model: %lld of %lld weights held at "
                "0 (no delta pulls)\n",
                options.server_index,
                static_cast<long long>(CountPruned(*options.keep)),
                static_cast<long long>(options.keep->size()));
  }
  std::fflush(stdout);
  WritePortFile(absl::GetFlag(FLAGS_port_file), port);

  auto checkpoint = [&] {
    WriteOneCheckpoint(checkpoint_dir, options.server_index, store, &metrics);
  };
  ServeUntilSignal(
      *store, options.server_index, absl::GetFlag(FLAGS_log_every_s),
      checkpoint_dir.empty() ? 0 : absl::GetFlag(FLAGS_checkpoint_every_s),
      checkpoint);
  // Let in-flight calls finish (bounded), checkpoint what the queues hold,
  // then stop the apply threads.
  (*server)->StopServing(absl::Seconds(5));
  if (!checkpoint_dir.empty()) checkpoint();
  (*server)->Shutdown(absl::Seconds(0));
  const ParamStoreStats final_stats = store->stats();
  std::printf(
      "asgd_server %d: stopped at version %llu after %llu pulls (%llu as "
      "updates); largest update step %.3g (--max_change %g, %llu clipped)\n",
      options.server_index, static_cast<unsigned long long>(store->version()),
      static_cast<unsigned long long>(final_stats.pulls),
      static_cast<unsigned long long>(final_stats.update_pulls),
      final_stats.largest_change, options.max_change,
      static_cast<unsigned long long>(final_stats.updates_clipped));
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  // Two malloc arenas, set before any thread starts. glibc gives every
  // thread that allocates its own arena (up to 8 per core), and each keeps
  // what was freed in it: gRPC's threads, which allocate every message,
  // then hold hundreds of megabytes after a burst of calls (50,000 pulls
  // opened and reset on the seed model: +853 MB kept with the default,
  // +82-99 MB with two arenas; docs/reliability.md). The server's own hot
  // paths (decode, apply) allocate nothing per element.
  mallopt(M_ARENA_MAX, 2);
  asgd::ParseCommandLine(
      argc, argv,
      "asgd parameter server: holds one slice of the model, sharded across "
      "apply threads, and serves PullStream/PushStream/DescribeModel over gRPC.\n"
      "Example: asgd_server --server_index=0 --num_servers=2 --port=0");
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return asgd::Run();
}
