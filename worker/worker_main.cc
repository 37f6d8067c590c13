// asgd_worker: pulls the model from the parameter-server pool, computes
// minibatch gradients of the acoustic model on its part of the data (an asgd
// corpus, or a Kaldi data directory with pdf alignments, streamed) and
// pushes them, asynchronously, until it has done its epochs or steps.
//
//   asgd_worker --servers=127.0.0.1:5001,127.0.0.1:5002 --corpus=/tmp/corpus
//       --worker_index=0 --num_workers=2 --epochs=3
//   asgd_worker --servers=... --kaldi_data=data/train
//       --kaldi_alignments='exp/tri3_ali/pdf.*.gz' --kaldi_heldout_data=...
//       --kaldi_heldout_alignments=... --worker_index=0 --num_workers=2
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/main_preamble.h"
#include "common/security_flags.h"
#include "common/status_macros.h"
#include "common/wire_codec.h"
#include "corpus/corpus_io.h"
#include "model/backend_factory.h"
#include "model/cuda/cuda_loader.h"
#include "model/cuda/cuda_options.h"
#include "model/model_file.h"
#include "model/prune_mask.h"
#include "worker/data/kaldi_data.h"
#include "worker/consensus/consensus_worker.h"
#include "worker/asgd_flags.h"
#include "worker/backend_flags.h"
#include "worker/consensus_flags.h"
#include "worker/decentralized_flags.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"
#include "worker/kaldi_flags.h"
#include "worker/kaldi_train_flags.h"
#include "worker/loop/loop.h"
#include "worker/loop/worker_metrics.h"
#include "worker/peer/decentralized_metrics.h"
#include "worker/peer/decentralized_worker.h"
#include "worker/pipeline_flags.h"
#include "worker/ps/connect.h"
#include "worker/ps/trainer.h"
#include "worker/pull_flags.h"
#include "worker/teacher_flags.h"

ABSL_FLAG(std::string, servers, "",
          "Comma-separated host:port of every server in the pool (any order).");
ABSL_FLAG(std::string, corpus, "",
          "Corpus directory (see corpus/README.md); or --kaldi_data.");
ABSL_FLAG(int, worker_index, 0, "This worker's index in [0, num_workers).");
ABSL_FLAG(int, num_workers, 1,
          "Number of workers; worker i trains on utterances u with "
          "u % num_workers == i.");
ABSL_FLAG(std::string, mode, "asgd",
          "asgd (asynchronous SGD through the servers), sync (synchronous "
          "baseline; start the servers with --sync_workers=N) or sgd "
          "(single-worker SGD baseline on a local model, handed to the "
          "servers at the end); adpsgd or allreduce (decentralized: the "
          "workers average models with each other / allreduce gradients, "
          "see --topology and --peers); easgd or admm (consensus: each "
          "worker trains its own model, pulled toward the servers' "
          "consensus every --consensus_every minibatches); pipeline (the "
          "model's layers split into --stages, one process each, see "
          "--stage and --next_stage).");
ABSL_FLAG(int, batch_size, 256,
          "Labelled frames per minibatch (recurrent models: whole chunks of "
          "--chunk_frames, about this many frames).");
ABSL_FLAG(bool, minibatch_pool, false,
          "Take minibatch ids from the shared pool on server 0 instead of a "
          "static per-worker partition, so slow workers take fewer batches.");
ABSL_FLAG(double, slowdown, 1.0,
          "Make this worker a straggler: idle (slowdown - 1) x the compute "
          "time after each minibatch (1: no slowdown).");
ABSL_FLAG(double, local_learning_rate, 0,
          "Learning rate of local SGD (sgd, adpsgd, allreduce, easgd, admm, "
          "warm start); 0: the servers' --learning_rate.");
ABSL_FLAG(double, epochs, 1.0,
          "Passes over this worker's part of the data (0: no limit).");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0: no limit).");
ABSL_FLAG(double, time_budget_s, 0,
          "Stop training after this many seconds (0: no limit): a wall-clock "
          "budget, e.g. to compare models at equal time. Not with the "
          "lockstep modes (sync, allreduce).");
ABSL_FLAG(int, chunk_frames, 20,
          "Recurrent models (lstm, blstm): labelled frames per training chunk "
          "(truncated backpropagation through time at chunk boundaries).");
ABSL_FLAG(int, chunk_left_context, -1,
          "Recurrent models: extra frames before each chunk that warm up the "
          "state but are not trained on (-1: 10).");
ABSL_FLAG(int, chunk_right_context, -1,
          "Recurrent models: extra frames after each chunk (-1: 10 for "
          "bidirectional models, 0 otherwise).");
ABSL_FLAG(int, log_every, 100, "Steps between progress lines.");
ABSL_FLAG(int, eval_every, 0,
          "Steps between held-out evaluations (0: only at the end).");
ABSL_FLAG(double, eval_every_s, 0,
          "Seconds between held-out evaluations (0: only at the end).");
ABSL_FLAG(int64_t, eval_frames, 0,
          "Held-out frames used by the periodic evaluations (an even subset; "
          "0: all). The final evaluation always uses all.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the minibatch order.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads for this worker.");
ABSL_FLAG(std::string, resident_model, "auto",
          "on, off, auto (on with --backend cuda): the model, the summed "
          "gradients and 1-bit encoding stay on the GPU (asgd, sync).");
ABSL_FLAG(std::string, save_model, "",
          "If set, save the final pulled model to this file.");
ABSL_FLAG(std::string, metrics_host, "0.0.0.0",
          "Address of the metrics endpoint (--metrics_port).");
ABSL_FLAG(int, connect_timeout_s, 60,
          "Seconds to wait for the servers to come up.");
ABSL_FLAG(int, rpc_timeout_s, 60, "Deadline of every pull and push, seconds.");
ABSL_FLAG(std::string, wire_dtype, "fp32",
          "Encoding of pulled weights (and of pushed gradients unless "
          "--push_encoding says otherwise) on the wire: fp32, or bf16 "
          "(bfloat16, half the bytes; the servers keep float32 weights and "
          "optimizer state).");
ABSL_FLAG(std::string, push_encoding, "",
          "Encoding of pushed gradients: fp32, bf16, onebit (1 bit per "
          "element plus two values per row, with error feedback: what a push "
          "loses is carried by the next ones) or topk (the --top_k_fraction "
          "largest elements of each chunk, with error feedback). Empty: as "
          "--wire_dtype. The servers must accept it (asgd_server "
          "--compressed_pushes).");
ABSL_FLAG(double, top_k_fraction, 0.01,
          "--push_encoding=topk: the share of elements each push sends, in "
          "(0, 0.25].");

namespace asgd {
namespace {

int Fail(const absl::Status& s) { return ReportFailure("asgd_worker", s); }

void LogBadData(int index, const BadDataReporter& bad_data) {
  std::printf("worker %d: bad data skipped: %s\n", index,
              bad_data.counts().ToString().c_str());
  std::fflush(stdout);
}

// --save_model, when set: `params` as a model file; 0 or the failure's code.
int SaveFinalModel(int index, const ModelSpec& spec,
                   const std::vector<float>& params,
                   const std::vector<std::string>& pruned = {}) {
  const std::string path = absl::GetFlag(FLAGS_save_model);
  if (path.empty()) return 0;
  if (absl::Status s = SaveModel(path, spec, params, pruned); !s.ok()) {
    return Fail(s);
  }
  std::printf("worker %d: saved model to %s\n", index, path.c_str());
  return 0;
}

// --mode=adpsgd or allreduce: the shared setup's loop options plus the
// decentralized flags; RunDecentralizedWorker logs the summary lines.
int RunDecentralized(LoopOptions loop, int num_workers, int64_t lockstep_steps,
                     prometheus::Registry& registry, ParamClient* servers,
                     ModelBackend* backend, const ModelSpec& spec,
                     const ExampleSet* train, const OpenBatchSource& open_source,
                     const ExampleSet* heldout,
                     const SecurityOptions& security) {
  auto mode = ParseDecentralizedMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return Fail(mode.status());
  DecentralizedWorkerOptions o;
  o.num_workers = num_workers;
  o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  if (absl::Status s = ApplyDecentralizedFlags(&o); !s.ok()) return Fail(s);
  if (*mode == DecentralizedMode::kAllreduce && loop.max_steps == 0) {
    // Lockstep, as --mode=sync.
    loop.max_steps = lockstep_steps;
    loop.epochs = 0;
  }
  DecentralizedMetrics peer_metrics(registry, loop.worker_index);
  o.decentralized.loop = loop;
  o.decentralized.mode = *mode;
  o.decentralized.allreduce_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  o.decentralized.peer_observer = &peer_metrics;
  o.decentralized.open_source = open_source;
  o.local_learning_rate = absl::GetFlag(FLAGS_local_learning_rate);
  o.security = security;
  o.send_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  auto result =
      RunDecentralizedWorker(o, servers, backend, train, heldout, &std::cout);
  if (!result.ok()) return Fail(result.status());
  return SaveFinalModel(loop.worker_index, spec, result->run.train.params);
}

// The flags that decide what this worker is, checked before it connects.
struct WorkerSetup {
  int index = 0;
  int num_workers = 1;
  bool kaldi = false;  // --kaldi_data, else --corpus
  KaldiInput kaldi_train, kaldi_heldout;
  bool decentralized = false;  // adpsgd, allreduce
  bool consensus = false;      // easgd, admm, with these flags:
  ConsensusOptions consensus_options;
  bool pipeline = false;  // with these flags:
  PipelineStageOptions pipeline_options;
  TrainMode mode = TrainMode::kAsgd;
  bool pool = false;
  std::string pool_run_id;
  std::vector<std::string> addresses;
  WireDtype wire_dtype = WireDtype::kFloat32;
  std::optional<PushEncoding> push_encoding;
};

absl::Status ReadTrainingMode(WorkerSetup* setup) {
  // adpsgd and allreduce share the setup and branch off before the Trainer;
  // like sgd, they use the servers only for the initial model and the final
  // hand-over. easgd and admm branch off too, to their own trainer.
  const std::string mode = absl::GetFlag(FLAGS_mode);
  setup->decentralized = IsDecentralizedMode(mode);
  setup->consensus = IsConsensusMode(mode);
  setup->pipeline = mode == "pipeline";
  setup->mode = TrainMode::kSgd;
  if (setup->pipeline) {
    ASGD_RETURN_IF_ERROR(
        ApplyPipelineFlags(setup->num_workers, &setup->pipeline_options));
  } else if (setup->consensus) {
    ASGD_RETURN_IF_ERROR(ApplyConsensusFlags(mode, setup->num_workers,
                                             &setup->consensus_options));
  } else if (!setup->decentralized) {
    ASGD_ASSIGN_OR_RETURN(setup->mode, ParseTrainMode(mode));
  }
  setup->pool = absl::GetFlag(FLAGS_minibatch_pool);
  if (setup->pool &&
      (setup->mode == TrainMode::kSync || setup->consensus ||
       setup->pipeline)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode=", mode,
        " takes no --minibatch_pool (",
        setup->mode == TrainMode::kSync ? "every worker must run the same "
                                          "number of steps)"
        : setup->pipeline ? "each pipeline's stage 0 reads its own part)"
                          : "each worker trains its own model on its own "
                            "data)"));
  }
  if (setup->pool && !setup->decentralized) {
    ASGD_ASSIGN_OR_RETURN(setup->pool_run_id, PoolRunIdFromFlags());
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerSetup> ReadSetup() {
  WorkerSetup setup;
  setup.index = absl::GetFlag(FLAGS_worker_index);
  setup.num_workers = absl::GetFlag(FLAGS_num_workers);
  if (setup.num_workers < 1 || setup.index < 0 ||
      setup.index >= setup.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--worker_index=%d must be in [0, --num_workers=%d)",
                        setup.index, setup.num_workers));
  }
  setup.kaldi = !KaldiDataFlag().empty();
  if (absl::GetFlag(FLAGS_corpus).empty() == !setup.kaldi) {
    return absl::InvalidArgumentError(
        "give exactly one of --corpus and --kaldi_data");
  }
  if (setup.kaldi) {
    ASGD_RETURN_IF_ERROR(KaldiTrainingInputsFromFlags(
        setup.index == 0, &setup.kaldi_train, &setup.kaldi_heldout));
    setup.kaldi_train.teacher_scp = TeacherPosteriorsFlag();
  }
  if (absl::GetFlag(FLAGS_batch_size) < 1) {
    return absl::InvalidArgumentError("--batch_size must be >= 1");
  }
  if (const std::string r = absl::GetFlag(FLAGS_resident_model);
      r != "auto" && r != "on" && r != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--resident_model=", r, ": want on, off or auto"));
  }
  ASGD_RETURN_IF_ERROR(ReadTrainingMode(&setup));
  ASGD_RETURN_IF_ERROR(CheckTeacherFlags(setup.kaldi, setup.pipeline));
  ASGD_ASSIGN_OR_RETURN(setup.addresses,
                        ParseServerList(absl::GetFlag(FLAGS_servers)));
  ASGD_ASSIGN_OR_RETURN(setup.wire_dtype,
                        ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype)));
  if (const std::string e = absl::GetFlag(FLAGS_push_encoding); !e.empty()) {
    ASGD_ASSIGN_OR_RETURN(setup.push_encoding, ParsePushEncoding(e));
  }
  // A build without CUDA cannot honour --backend=cuda: say so before
  // connecting or loading the corpus (the plugin itself loads later, after
  // the metrics endpoint).
  if (BackendFromFlags() == "cuda") {
    ASGD_RETURN_IF_ERROR(CudaBuildStatus());
  }
  return setup;
}

// The training and held-out examples, and what owns what they refer to.
struct WorkerData {
  std::unique_ptr<Utterances> train_utts, heldout_utts;  // asgd corpus
  KaldiWorkerData kaldi;
  std::unique_ptr<ExampleSet> train, heldout;
  OpenBatchSource open_source;  // streamed Kaldi data
  int64_t all_train_frames = 0;
  int corpus_dim = 0, corpus_classes = 0;
};

// The asgd corpus, loaded whole (Kaldi data is read after connecting: how it
// is cut depends on the model). Bad features are refused (or skipped) here,
// before anything reaches the servers.
absl::Status LoadAsgdCorpus(const WorkerSetup& setup,
                            BadDataReporter* bad_data, WorkerData* data) {
  ASGD_ASSIGN_OR_RETURN(corpus::CorpusReadOptions read_options,
                        CorpusReadOptionsFromFlags());
  read_options.on_skip = bad_data->Callback();
  ASGD_ASSIGN_OR_RETURN(
      auto corpus, corpus::LoadCorpus(absl::GetFlag(FLAGS_corpus), read_options));
  const int index = setup.index;
  // With the pool every worker holds all utterances; otherwise its own part.
  data->train_utts = std::make_unique<Utterances>(Utterances::FromCorpus(
      corpus.info, corpus.train, setup.pool ? 0 : index,
      setup.pool ? 1 : setup.num_workers));
  data->heldout_utts = std::make_unique<Utterances>(
      Utterances::FromCorpus(corpus.info, corpus.heldout));
  data->all_train_frames = corpus.train_frames;
  std::printf(
      "worker %d: %lld training frames (%s), %lld held-out\n", index,
      static_cast<long long>(data->train_utts->num_frames()),
      setup.pool
          ? "all, minibatches from the shared pool"
          : absl::StrFormat("part %d of %d", index, setup.num_workers).c_str(),
      static_cast<long long>(data->heldout_utts->num_frames()));
  data->corpus_dim = corpus.info.feature_dim;
  data->corpus_classes = corpus.info.num_classes;
  return absl::OkStatus();
}

PoolClientOptions ClientOptionsFromFlags(const WorkerSetup& setup,
                                         const SecurityOptions& security) {
  PoolClientOptions o;
  o.worker_id = setup.index;
  o.security = security;
  o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  o.rpc_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  o.wire_dtype = setup.wire_dtype;
  o.push_encoding = setup.push_encoding;
  o.top_k_fraction = absl::GetFlag(FLAGS_top_k_fraction);
  PullOptionsFromFlags(&o);  // --delta_pulls, --replay_threads
  return o;
}

// The examples of the pool's model: Kaldi data cut for it, or the loaded
// corpus checked against it.
absl::Status MakeWorkerExamples(WorkerSetup* setup_ptr, const ModelSpec& spec,
                                BadDataReporter* bad_data, WorkerData* data) {
  WorkerSetup& setup = *setup_ptr;
  DataOptions options;
  options.chunk_frames = absl::GetFlag(FLAGS_chunk_frames);
  options.left_context = absl::GetFlag(FLAGS_chunk_left_context);
  options.right_context = absl::GetFlag(FLAGS_chunk_right_context);
  if (setup.kaldi) {
    setup.kaldi_train.on_skip = setup.kaldi_heldout.on_skip =
        bad_data->Callback();
    ASGD_ASSIGN_OR_RETURN(
        data->kaldi,
        PrepareKaldiWorkerData(setup.kaldi_train, setup.kaldi_heldout, spec,
                               options, setup.index, setup.num_workers,
                               setup.pool));
    data->train = std::move(data->kaldi.train);
    data->heldout = std::move(data->kaldi.heldout);
    data->open_source = data->kaldi.open_source;
    data->all_train_frames = data->kaldi.all_frames;
    std::printf("worker %d: %s; global CMVN: %s\n", setup.index,
                data->kaldi.summary.c_str(),
                setup.kaldi_train.global_cmvn_source.c_str());
    return absl::OkStatus();
  }
  ASGD_RETURN_IF_ERROR(
      CheckDataFitsModel(data->corpus_dim, data->corpus_classes, spec));
  ASGD_ASSIGN_OR_RETURN(data->train,
                        MakeExamples(spec, data->train_utts.get(), options));
  ASGD_ASSIGN_OR_RETURN(data->heldout,
                        MakeExamples(spec, data->heldout_utts.get(), options));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelBackend>> MakeWorkerBackend(
    const WorkerSetup& setup, const ModelSpec& spec, const BatchShape& shape,
    const ParamClient& client) {
  ASGD_ASSIGN_OR_RETURN(const CudaOptions cuda_options, CudaOptionsFromFlags());
  // A pipeline stage computes with layer ranges of its own, on --backend
  // (RunPipelineStage says which); this whole-model one stays unused.
  const std::string name = setup.pipeline ? "cpu" : BackendFromFlags();
  std::string note;
  ASGD_ASSIGN_OR_RETURN(
      std::unique_ptr<ModelBackend> backend,
      CreateBackend(name, spec, shape.rows(), &note, cuda_options));
  if (!note.empty() && !setup.pipeline) {
    std::printf("worker %d: %s\n", setup.index, note.c_str());
  }
  std::printf(
      "worker %d: connected to %zu servers, model %s, %lld params, backend "
      "%s, minibatches of %d x %d rows\n",
      setup.index, setup.addresses.size(), DescribeModel(spec).c_str(),
      static_cast<long long>(client.layout().total_size()),
      setup.pipeline ? "per stage" : std::string(backend->name()).c_str(),
      shape.examples, shape.steps);
  std::fflush(stdout);
  return WithTeacherFromFlags(std::move(backend), setup.index, cuda_options);
}

LoopOptions LoopOptionsFromFlags(const WorkerSetup& setup,
                                 TrainerObserver* observer) {
  LoopOptions loop;
  loop.observer = observer;
  loop.worker_index = setup.index;
  loop.batch_size = absl::GetFlag(FLAGS_batch_size);
  loop.max_steps = absl::GetFlag(FLAGS_max_steps);
  loop.epochs = absl::GetFlag(FLAGS_epochs);
  loop.max_seconds = absl::GetFlag(FLAGS_time_budget_s);
  loop.slowdown = absl::GetFlag(FLAGS_slowdown);
  loop.log_every = absl::GetFlag(FLAGS_log_every);
  loop.eval_every = absl::GetFlag(FLAGS_eval_every);
  loop.eval_every_s = absl::GetFlag(FLAGS_eval_every_s);
  loop.eval_frames = absl::GetFlag(FLAGS_eval_frames);
  loop.seed = absl::GetFlag(FLAGS_seed);
  loop.data_source = absl::StrFormat(
      "%s %s, %s", setup.kaldi ? "Kaldi data" : "corpus",
      setup.kaldi ? setup.kaldi_train.data_dir : absl::GetFlag(FLAGS_corpus),
      setup.pool ? std::string("minibatches from the shared pool")
                 : absl::StrFormat("part %d of %d", setup.index,
                                   setup.num_workers));
  return loop;
}

TrainerOptions TrainerOptionsFromFlags(const WorkerSetup& setup,
                                       LoopOptions loop,
                                       const OpenBatchSource& open_source,
                                       int64_t lockstep_steps) {
  const TrainMode mode = setup.mode;
  TrainerOptions options;
  options.mode = mode;
  AsgdTrainerFlags(&options);  // push_every ... warm_start_epochs
  options.use_pool = setup.pool;
  options.pool_run_id = setup.pool_run_id;
  options.local_learning_rate = absl::GetFlag(FLAGS_local_learning_rate);
  options.open_source = open_source;
  if (mode == TrainMode::kSync) {
    options.push_every = 1;
    if (loop.max_steps == 0) loop.max_steps = lockstep_steps;
    loop.epochs = 0;
  }
  options.loop = loop;
  return options;
}

// --mode=easgd or admm: the shared setup's loop options plus the consensus
// flags (read by ReadSetup); saves the final consensus.
int RunConsensus(const LoopOptions& loop, ConsensusOptions o,
                 prometheus::Registry& registry, ParamClient* client,
                 ModelBackend* backend, const ModelSpec& spec,
                 const WorkerData& data) {
  o.loop = loop;
  o.open_source = data.open_source;
  auto result = RunConsensusWorker(
      o, absl::GetFlag(FLAGS_local_learning_rate), registry, client, backend,
      data.train.get(), data.heldout.get(), &std::cout);
  if (!result.ok()) return Fail(result.status());
  return SaveFinalModel(loop.worker_index, spec, result->train.params,
                        PrunedTensorsOf(client->attributes()));
}

// Trains through the pool (asgd, sync, sgd) and logs the summary.
int RunTrainer(const TrainerOptions& options, ParamClient* client,
               ModelBackend* backend, const ModelSpec& spec,
               const WorkerData& data, const BadDataReporter& bad_data) {
  const int index = options.loop.worker_index;
  TrainerOptions o = options;
  const std::string resident = absl::GetFlag(FLAGS_resident_model);
  o.resident_model = resident == "on" ||
                     (resident == "auto" && backend->name() == "cuda");
  Trainer trainer(client, backend, data.train.get(), data.heldout.get(), o,
                  &std::cout);
  auto result = trainer.Run();
  LogBadData(index, bad_data);
  if (!result.ok()) return Fail(result.status());
  LogSummary(&std::cout, index, *result,
             absl::StrFormat(", %d pushes dropped as stale, %d refused busy",
                             result->pushes_dropped, result->pushes_busy) +
                 DeltaPullSummary(*client));
  return SaveFinalModel(index, spec, result->params,
                        PrunedTensorsOf(client->attributes()));
}

int Run() {
  auto setup = ReadSetup();
  if (!setup.ok()) return Fail(setup.status());
  const int index = setup->index;
  SetBlasThreads(absl::GetFlag(FLAGS_blas_threads));

  // Metrics before anything else starts threads or connections.
  ProcessMetrics process_metrics("worker");
  WorkerMetrics metrics(process_metrics.registry(), index);
  const std::string metrics_host = absl::GetFlag(FLAGS_metrics_host);
  if (absl::Status s = process_metrics.Serve(metrics_host); !s.ok()) {
    return Fail(s);
  }
  if (process_metrics.serving()) {
    std::printf("worker %d: metrics on %s\n", index,
                process_metrics.url().c_str());
  }
  // Utterances skipped as bad data (--bad_data=skip), logged and counted.
  BadDataReporter bad_data(&std::cout, absl::StrFormat("worker %d: ", index),
                           &process_metrics.registry(), index);

  WorkerData data;
  if (!setup->kaldi) {
    if (absl::Status s = LoadAsgdCorpus(*setup, &bad_data, &data); !s.ok()) {
      return Fail(s);
    }
  }
  auto security = SecurityOptionsFromFlags();
  if (!security.ok()) return Fail(security.status());
  auto client = ConnectToPool(setup->addresses,
                              ClientOptionsFromFlags(*setup, *security));
  if (!client.ok()) return Fail(client.status());
  const ModelSpec spec = (*client)->model();
  if (absl::Status s = MakeWorkerExamples(&*setup, spec, &bad_data, &data);
      !s.ok()) {
    return Fail(s);
  }
  const BatchShape shape =
      ShapeOfBatch(*data.train, absl::GetFlag(FLAGS_batch_size));
  auto backend = MakeWorkerBackend(*setup, spec, shape, **client);
  if (!backend.ok()) return Fail(backend.status());
  if (absl::Status s = ReplayOnDeviceFromFlags(backend->get(), client->get());
      !s.ok()) {
    return Fail(s);
  }

  const LoopOptions loop = LoopOptionsFromFlags(*setup, &metrics);
  // Lockstep modes (sync, allreduce): every worker runs the same number of
  // steps, from the whole training set's size, so none waits for a finished
  // one.
  const int64_t lockstep_steps =
      LockstepSteps(loop.epochs, data.all_train_frames, setup->num_workers,
                    shape.examples * data.train->max_labelled_steps());
  if (setup->pipeline) {
    PipelineStageOptions o = setup->pipeline_options;
    o.loop = loop;
    o.local_learning_rate = absl::GetFlag(FLAGS_local_learning_rate);
    o.security = *security;
    o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
    o.idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
    o.open_source = data.open_source;
    auto r = RunPipelineStage(o, client->get(), data.train.get(),
                              data.heldout.get(), &process_metrics.registry(),
                              &std::cout);
    LogBadData(index, bad_data);
    if (!r.ok()) return Fail(r.status());
    if (o.stage != 0) return 0;  // stage 0 holds the servers' final model
    return SaveFinalModel(index, spec, r->train.params,
                          PrunedTensorsOf((*client)->attributes()));
  }
  if (setup->consensus || setup->decentralized) {
    const int rc =
        setup->consensus
            ? RunConsensus(loop, setup->consensus_options,
                           process_metrics.registry(), client->get(),
                           backend->get(), spec, data)
            : RunDecentralized(loop, setup->num_workers, lockstep_steps,
                               process_metrics.registry(), client->get(),
                               backend->get(), spec, data.train.get(),
                               data.open_source, data.heldout.get(),
                               *security);
    LogBadData(index, bad_data);
    return rc;
  }
  return RunTrainer(
      TrainerOptionsFromFlags(*setup, loop, data.open_source, lockstep_steps),
      client->get(), backend->get(), spec, data, bad_data);
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd worker: trains the acoustic model (DNN, CNN, LSTM, BLSTM) held "
      "by an asgd server pool with asynchronous SGD, toward the servers' "
      "consensus, or with its peers (--mode).\nExample: asgd_worker "
      "--servers=127.0.0.1:5001,127.0.0.1:5002 --corpus=/tmp/asgd-corpus "
      "--worker_index=0 --num_workers=2");
  return asgd::Run();
}
