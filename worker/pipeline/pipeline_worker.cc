#include "worker/pipeline/pipeline_worker.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/backend_factory.h"
#include "worker/data/make_examples.h"
#include "worker/pipeline/data_upstream.h"
#include "worker/pipeline/pipeline_metrics.h"
#include "worker/pipeline/stage_grpc_client.h"
#include "worker/pipeline/stage_grpc_service.h"
#include "worker/pipeline/stage_updaters.h"

namespace asgd {
namespace {

// The metrics, and a progress line every log_every updates (stages > 0:
// stage 0 logs the training steps instead).
class StageProgress final : public StageObserver {
 public:
  StageProgress(prometheus::Registry* registry, int stage, int log_every,
                std::ostream* log)
      : stage_(stage), log_every_(stage > 0 ? log_every : 0), log_(log) {
    if (registry != nullptr) {
      metrics_ = std::make_unique<PipelineMetrics>(*registry, stage);
    }
  }

  void OnForward(double seconds, int in_flight) override {
    if (!start_.has_value()) start_ = absl::Now();
    if (metrics_) metrics_->OnForward(seconds, in_flight);
    busy_ += seconds;
    in_flight_ = in_flight;
  }

  void OnUpdate(double seconds, int delay) override {
    if (metrics_) metrics_->OnUpdate(seconds, delay);
    busy_ += seconds;
    --in_flight_;
    if (log_every_ > 0 && ++updates_ % log_every_ == 0 && log_ != nullptr) {
      const double wall = absl::ToDoubleSeconds(absl::Now() - *start_);
      *log_ << absl::StrFormat(
                   "stage %d minibatch %d busy %.0f%% delay %d in-flight %d",
                   stage_, updates_, wall > 0 ? 100.0 * busy_ / wall : 0.0,
                   delay, in_flight_ + 1)
            << std::endl;
    }
  }

 private:
  const int stage_, log_every_;
  std::ostream* const log_;
  std::optional<absl::Time> start_;  // of the first forward pass
  std::unique_ptr<PipelineMetrics> metrics_;
  double busy_ = 0;
  int in_flight_ = 0;
  int64_t updates_ = 0;
};

std::string DescribeDelays(const std::map<int, int64_t>& delays) {
  std::vector<std::string> parts;
  for (auto it = delays.rbegin(); it != delays.rend(); ++it) {
    parts.push_back(absl::StrCat(it->first, ": ", it->second));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

// Stage s > 0's server for stage s - 1's stream.
absl::StatusOr<std::unique_ptr<StageServer>> ListenForPrevious(
    const PipelineStageOptions& options, const StageGroup& group, int depth,
    const ModelSpec& spec, const LayerRange& range, std::ostream* log) {
  const int s = group.stage;
  StageServerOptions so;
  so.host = options.listen_host;
  so.port = options.stage_port;
  so.group = group;
  so.group.in_flight = StageWindow(depth, s - 1);
  so.shape.max_rows = group.max_rows;
  so.shape.width = range.in_dim();
  so.shape.labels_per_row = spec.output_frames;
  so.shape.num_classes = spec.num_classes;
  so.shape.sequences = spec.is_sequence();
  so.security = options.security;
  so.connect_timeout = options.connect_timeout;
  so.idle_timeout = options.idle_timeout;
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<StageServer> server,
                        StageServer::Start(so));
  *log << "stage " << s << ": layers " << group.bounds[s] << "-"
       << group.bounds[s + 1] - 1 << ", listening for stage " << s - 1
       << " on port " << server->port() << std::endl;
  return server;
}

// Where the stage's updates go (stage_updaters.h); *on_servers is set for
// ServerSgd.
std::unique_ptr<StageUpdater> MakeUpdater(const PipelineStageOptions& options,
                                          ParamClient* client,
                                          const LayerRange& range, float lr,
                                          const std::vector<uint64_t>& versions,
                                          ServerSgd** on_servers) {
  if (options.weights == PipelineWeights::kLocal) {
    return std::make_unique<HandOffSgd>(client, range.param_offset(),
                                        range.param_count(), lr,
                                        options.stage);
  }
  auto u = std::make_unique<ServerSgd>(client, range.param_offset(),
                                       range.param_count(), lr,
                                       options.pull_every, options.stage,
                                       versions);
  *on_servers = u.get();
  return u;
}

void LogStageDone(const StageStats& st, int s, const std::string& where,
                  std::ostream* log) {
  const double busy = st.forward_seconds + st.backward_seconds;
  *log << absl::StrFormat(
              "stage %d done: %d minibatches in %.1f s, busy %.0f%% (forward "
              "%.1f s, backward %.1f s, idle %.1f s), delays %s, at most %d "
              "in flight; %s",
              s, st.minibatches, st.seconds,
              st.seconds > 0 ? 100.0 * busy / st.seconds : 0.0,
              st.forward_seconds, st.backward_seconds, st.idle_seconds,
              DescribeDelays(st.delays), st.max_in_flight, where)
       << std::endl;
}

// The stage's runner, its layers on options.backend (logged).
absl::StatusOr<std::unique_ptr<StageRunner>> MakeStageRunner(
    const PipelineStageOptions& options, const ModelSpec& spec,
    const StagePlan& plan, int depth, float lr, int rows,
    StageObserver* observer, std::ostream* log) {
  std::string backend_note;
  ASGD_ASSIGN_OR_RETURN(
      LayerRangeFactory ranges,
      LayerRangeFactoryFor(options.backend, options.cuda, &backend_note));
  *log << "stage " << options.stage << ": " << backend_note << "\n"
       << std::flush;
  StageRunnerOptions ro;
  ro.range_factory = std::move(ranges);
  ro.spec = spec;
  ro.plan = plan;
  ro.stage = options.stage;
  ro.depth = depth;
  ro.learning_rate = lr;
  ro.max_rows = rows;
  ro.slowdown = options.loop.slowdown;
  ro.observer = observer;
  return StageRunner::Create(ro);
}

}  // namespace

absl::StatusOr<StagePlan> PipelinePlan(const PipelineStageOptions& options,
                                       const ModelSpec& spec, int rows) {
  StagePlan plan;
  if (!options.stage_plan.empty()) {
    ASGD_ASSIGN_OR_RETURN(plan, ParseStagePlan(spec, options.stage_plan));
    if (options.stages != 0 && options.stages != plan.stages()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--stages=", options.stages, " but --stage_plan=",
          options.stage_plan, " has ", plan.stages(), " stages"));
    }
  } else if (options.stages > 0) {
    ASGD_ASSIGN_OR_RETURN(plan, BalanceStages(spec, options.stages, rows));
  } else {
    return absl::InvalidArgumentError(
        "--mode=pipeline needs --stages=N (balanced) or --stage_plan");
  }
  if (options.stage < 0 || options.stage >= plan.stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage=", options.stage, " must be in [0, ",
                     plan.stages(), ")"));
  }
  const int depth = options.depth == 0 ? plan.stages() : options.depth;
  if (depth < 1 || depth > plan.stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline_depth=", options.depth, " must be in [1, ",
                     plan.stages(), "] (0: the number of stages)"));
  }
  const bool last = options.stage == plan.stages() - 1;
  if (last != options.next_stage.empty()) {
    return absl::InvalidArgumentError(
        last ? "the last stage takes no --next_stage"
             : absl::StrCat("stage ", options.stage,
                            " needs --next_stage=host:port of stage ",
                            options.stage + 1));
  }
  return plan;
}

absl::StatusOr<PipelineStageResult> RunPipelineStage(
    const PipelineStageOptions& options, ParamClient* client,
    const ExampleSet* train, const ExampleSet* heldout,
    prometheus::Registry* registry, std::ostream* log) {
  const ModelSpec& spec = client->model();
  const int s = options.stage;
  const BatchShape shape = ShapeOfBatch(*train, options.loop.batch_size);
  PipelineStageResult result;
  ASGD_ASSIGN_OR_RETURN(result.plan, PipelinePlan(options, spec, shape.rows()));
  const StagePlan& plan = result.plan;
  const int depth = options.depth == 0 ? plan.stages() : options.depth;
  ASGD_ASSIGN_OR_RETURN(
      const float lr,
      LocalLearningRate(options.local_learning_rate, client->attributes()));
  if (s == 0) {
    *log << "stage 0: " << plan.stages() << " stages, depth " << depth
         << ", weights "
         << (options.weights == PipelineWeights::kServers ? "on the servers"
                                                          : "local")
         << ", learning rate " << lr << "\n"
         << DescribeStagePlan(spec, plan, shape.rows()) << std::flush;
  }

  StageProgress progress(registry, s, options.loop.log_every, log);
  ASGD_ASSIGN_OR_RETURN(
      std::unique_ptr<StageRunner> runner,
      MakeStageRunner(options, spec, plan, depth, lr, shape.rows(), &progress,
                      log));
  result.window = runner->window();
  const LayerRange& range = runner->layers();

  StageGroup group;
  group.stage = s;
  group.num_stages = plan.stages();
  group.bounds = plan.bounds;
  group.layout_fingerprint = client->layout().Fingerprint();
  group.max_rows = shape.rows();

  std::unique_ptr<StageServer> server;
  if (s > 0) {
    ASGD_ASSIGN_OR_RETURN(
        server, ListenForPrevious(options, group, depth, spec, range, log));
  }

  // The pool's model; this stage trains its own layers of it.
  std::vector<float> params(client->layout().total_size());
  std::vector<uint64_t> versions;
  ASGD_RETURN_IF_ERROR(client->Pull(absl::MakeSpan(params), &versions));
  ServerSgd* on_servers = nullptr;
  const std::unique_ptr<StageUpdater> updater =
      MakeUpdater(options, client, range, lr, versions, &on_servers);
  runner->set_updater(updater.get());

  std::unique_ptr<GrpcDownstream> down;
  if (!runner->last()) {
    GrpcDownstreamOptions d;
    d.address = options.next_stage;
    d.group = group;
    d.group.in_flight = runner->window();
    d.out_width = range.out_dim();
    d.labels_per_row = spec.output_frames;
    d.security = options.security;
    d.connect_timeout = options.connect_timeout;
    ASGD_ASSIGN_OR_RETURN(down, GrpcDownstream::Connect(d));
  }

  std::unique_ptr<BatchSource> source;
  std::unique_ptr<LoopReporter> reporter;
  std::unique_ptr<DataUpstream> data;
  UpstreamLink* up = server.get();
  if (s == 0) {
    const uint64_t seed = options.loop.seed * 7919 + options.loop.worker_index;
    if (options.open_source) {
      ASGD_ASSIGN_OR_RETURN(source,
                            options.open_source(seed, options.loop.epochs));
    } else {
      source = std::make_unique<LocalSource>(train, seed, options.loop.epochs);
    }
    reporter = std::make_unique<LoopReporter>(options.loop, nullptr, heldout,
                                              log);
    data = std::make_unique<DataUpstream>(
        source.get(), shape, train->input_dim(), train->labels_per_row(),
        heldout, options.loop, reporter.get(), &result.train,
        [&runner] {
          const auto& d = runner->stats().delays;
          return absl::StrCat(" delay ", d.empty() ? 0 : d.rbegin()->first);
        });
    up = data.get();
  }
  const absl::Span<float> mine =
      absl::MakeSpan(params).subspan(range.param_offset(), range.param_count());
  ASGD_RETURN_IF_ERROR(runner->Run(mine, up, down.get()));
  if (server) server->Shutdown();
  result.stats = runner->stats();
  if (reporter) result.train.seconds = reporter->Seconds();

  if (s == 0) {
    LogSummary(log, options.loop.worker_index, result.train,
               absl::StrCat(", a pipeline of ", plan.stages(), " stages"));
    // Stage 0 finishes last: the servers now hold every stage's layers.
    result.train.params.resize(client->layout().total_size());
    ASGD_RETURN_IF_ERROR(
        client->Pull(absl::MakeSpan(result.train.params), &versions));
  }
  std::string where = absl::StrFormat("layers %d-%d handed to the servers",
                                      plan.bounds[s], plan.bounds[s + 1] - 1);
  if (on_servers != nullptr) {
    result.pushes_dropped = on_servers->dropped();
    where = absl::StrFormat(
        "%d updates applied by the servers, %d dropped or refused, %d pulls",
        on_servers->applied(), on_servers->dropped(), on_servers->pulls());
  }
  LogStageDone(result.stats, s, where, log);
  return result;
}

}  // namespace asgd
