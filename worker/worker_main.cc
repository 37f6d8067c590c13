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

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/metrics_endpoint.h"
#include "common/metrics_flags.h"
#include "common/pool_run_id.h"
#include "common/security_flags.h"
#include "common/wire_codec.h"
#include "corpus/corpus_io.h"
#include "model/backend_factory.h"
#include "model/cuda/cuda_loader.h"
#include "model/cuda/cuda_options.h"
#include "model/model_file.h"
#include "worker/data/kaldi_data.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"
#include "worker/kaldi_flags.h"
#include "worker/loop/loop.h"
#include "worker/loop/worker_metrics.h"
#include "worker/peer/decentralized_metrics.h"
#include "worker/peer/decentralized_worker.h"
#include "worker/ps/connect.h"
#include "worker/ps/trainer.h"

ABSL_FLAG(std::string, servers, "",
          "Comma-separated host:port of every server in the pool (any order).");
ABSL_FLAG(std::string, corpus, "",
          "Corpus directory (see corpus/README.md); or --kaldi_data.");
ABSL_FLAG(std::string, kaldi_heldout_data, "",
          "With --kaldi_data: a Kaldi data directory of held-out utterances "
          "(loaded into memory) for the evaluations; none: no evaluation.");
ABSL_FLAG(std::string, kaldi_heldout_alignments, "",
          "Pdf-id alignments of --kaldi_heldout_data (files and globs).");
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
          "see --topology and --peers).");
ABSL_FLAG(int, batch_size, 256,
          "Labelled frames per minibatch (recurrent models: whole chunks of "
          "--chunk_frames, about this many frames).");
ABSL_FLAG(int, push_every, 1,
          "Accumulate this many minibatch gradients per push (their average; "
          "the server scales its step, see asgd_server --minibatch_lr_scale).");
ABSL_FLAG(bool, compute_while_pushing, true,
          "SPEECH3 rule: while the previous push is on the wire, compute "
          "another minibatch instead of waiting (asgd mode).");
ABSL_FLAG(int, max_minibatches_per_push, 4,
          "With --compute_while_pushing: at most this many minibatches go into "
          "one push; then the worker waits for the previous push.");
ABSL_FLAG(bool, minibatch_pool, false,
          "Take minibatch ids from the shared pool on server 0 instead of a "
          "static per-worker partition, so slow workers take fewer batches.");
ABSL_FLAG(uint64_t, pool_seed, 1,
          "Example order of the pool's epochs; the same on every worker.");
ABSL_FLAG(std::string, pool_run_id_file, "",
          "With --minibatch_pool (required there): a file holding this run's "
          "id, 16 to 256 bytes (surrounding whitespace ignored), the same for "
          "every worker of the run and secret to everyone else: the pool "
          "keeps one dataset per run id, so no other client can take or use "
          "up the run's batches. New for each run, e.g. `head -c 16 "
          "/dev/urandom | od -An -tx1 | tr -d ' \\n'`.");
ABSL_FLAG(double, slowdown, 1.0,
          "Make this worker a straggler: idle (slowdown - 1) x the compute "
          "time after each minibatch (1: no slowdown).");
ABSL_FLAG(double, warm_start_epochs, 0,
          "Worker 0 trains this many epochs of plain SGD locally and hands "
          "the model to the servers before ASGD starts; the others wait.");
ABSL_FLAG(double, local_learning_rate, 0,
          "Learning rate of local SGD (sgd mode, warm start); 0: the servers' "
          "--learning_rate.");
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
ABSL_FLAG(std::string, backend, "auto",
          "Math backend: cpu (OpenBLAS), cuda (cuBLAS; fails without a GPU) or "
          "auto (cuda when a GPU is present, else cpu, with a log line).");
ABSL_FLAG(std::string, cuda_math, "tf32",
          "CUDA GEMM precision: tf32 (tensor cores, fp32 storage) or fp32.");
ABSL_FLAG(int, cuda_device, 0, "CUDA device index for --backend=cuda/auto.");
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
ABSL_FLAG(bool, overlap_pulls, true,
          "asgd mode: pull the next model in the background while minibatches "
          "compute (double buffering); the worker waits for a pull only when "
          "it got --max_overlapped_steps minibatches ahead of it.");
ABSL_FLAG(int, max_overlapped_steps, 1,
          "With --overlap_pulls: the most minibatches computed on one model "
          "while the next one is on the wire.");
ABSL_FLAG(bool, delta_pulls, true,
          "With float32 pulls: keep an exact copy of each "
          "server's slice and pull only the compressed updates applied since "
          "(servers with plain SGD log them; after float32 pushes, or from "
          "other servers, the weights come instead). Costs one more model in "
          "memory.");

// The decentralized modes (--mode=adpsgd, --mode=allreduce): the workers
// serve each other a peer service (see worker/decentralized_worker.h).
ABSL_FLAG(std::string, topology, "fixed_ring",
          "adpsgd: who averages with whom: fixed_ring (every step with the "
          "next worker on the ring) or random_ring (a fresh random pairing "
          "every step, from --topology_seed and the step number).");
ABSL_FLAG(uint64_t, topology_seed, 1,
          "adpsgd random_ring: seed of the pairings; the same on every worker.");
ABSL_FLAG(bool, delay_by_one, false,
          "adpsgd: compute each gradient on the previous iteration's weights, "
          "so the averaging runs entirely beside the computation.");
ABSL_FLAG(std::string, peer_host, "0.0.0.0",
          "adpsgd/allreduce: address the peer service listens on.");
ABSL_FLAG(int, peer_port, 0,
          "adpsgd/allreduce: port of this worker's peer service; 0 picks a "
          "free one (printed, and written to --peer_port_file).");
ABSL_FLAG(std::string, peer_port_file, "",
          "adpsgd/allreduce: write the peer port here once listening.");
ABSL_FLAG(std::string, peers, "",
          "adpsgd/allreduce: every worker's peer address host:port, "
          "comma-separated, in worker-index order (this worker's included).");
ABSL_FLAG(std::string, peers_file, "",
          "adpsgd/allreduce, instead of --peers: wait (up to "
          "--connect_timeout_s) until this file lists every worker's peer "
          "address (comma- or newline-separated, in worker-index order). A "
          "launcher writes it, atomically, once every --peer_port_file exists.");
ABSL_FLAG(double, peer_timeout_s, 5,
          "adpsgd: deadline of one averaging exchange; a slow or dead peer is "
          "skipped for that step and backed off. allreduce waits for its "
          "neighbours up to --rpc_timeout_s.");
ABSL_FLAG(double, peer_finish_timeout_s, 1800,
          "adpsgd/allreduce: at the end, wait at most this long for the other "
          "workers to finish (they may still average with this one); then "
          "worker 0 hands its model to the servers.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "asgd_worker: %s\n", s.ToString().c_str());
  return 1;
}

void LogBadData(int index, const BadDataReporter& bad_data) {
  std::printf("worker %d: bad data skipped: %s\n", index,
              bad_data.counts().ToString().c_str());
  std::fflush(stdout);
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
  auto topology = ParseTopology(absl::GetFlag(FLAGS_topology));
  if (!topology.ok()) return Fail(topology.status());
  const std::string peers = absl::GetFlag(FLAGS_peers);
  const std::string peers_file = absl::GetFlag(FLAGS_peers_file);
  if (num_workers > 1 && peers.empty() == peers_file.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--mode=adpsgd/allreduce with several workers needs exactly one of "
        "--peers and --peers_file"));
  }
  if (*mode == DecentralizedMode::kAllreduce && loop.max_steps == 0) {
    // Lockstep, as --mode=sync.
    loop.max_steps = lockstep_steps;
    loop.epochs = 0;
  }
  DecentralizedMetrics peer_metrics(registry, loop.worker_index);
  DecentralizedWorkerOptions o;
  o.decentralized.loop = loop;
  o.decentralized.mode = *mode;
  o.decentralized.delay_by_one = absl::GetFlag(FLAGS_delay_by_one);
  o.decentralized.adpsgd.topology = *topology;
  o.decentralized.adpsgd.topology_seed = absl::GetFlag(FLAGS_topology_seed);
  o.decentralized.allreduce_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  o.decentralized.peer_observer = &peer_metrics;
  o.decentralized.open_source = open_source;
  o.local_learning_rate = absl::GetFlag(FLAGS_local_learning_rate);
  o.num_workers = num_workers;
  o.peer_host = absl::GetFlag(FLAGS_peer_host);
  o.peer_port = absl::GetFlag(FLAGS_peer_port);
  o.security = security;
  o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  o.average_timeout = absl::Seconds(absl::GetFlag(FLAGS_peer_timeout_s));
  o.send_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  o.finish_timeout = absl::Seconds(absl::GetFlag(FLAGS_peer_finish_timeout_s));
  const std::string port_file = absl::GetFlag(FLAGS_peer_port_file);
  o.resolve_peers =
      [&](int port) -> absl::StatusOr<std::vector<std::string>> {
    WritePortFile(port_file, port);
    if (!peers.empty()) return ParsePeerList(peers);
    if (!peers_file.empty()) {
      return WaitForPeersFile(peers_file, num_workers, o.connect_timeout);
    }
    return std::vector<std::string>{absl::StrCat(o.peer_host, ":", port)};
  };
  auto result =
      RunDecentralizedWorker(o, servers, backend, train, heldout, &std::cout);
  if (!result.ok()) return Fail(result.status());
  if (const std::string path = absl::GetFlag(FLAGS_save_model); !path.empty()) {
    if (absl::Status s = SaveModel(path, spec, result->run.train.params);
        !s.ok()) {
      return Fail(s);
    }
    std::printf("worker %d: saved model to %s\n", loop.worker_index,
                path.c_str());
  }
  return 0;
}

int Run() {
  const int index = absl::GetFlag(FLAGS_worker_index);
  const int num_workers = absl::GetFlag(FLAGS_num_workers);
  if (num_workers < 1 || index < 0 || index >= num_workers) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--worker_index=%d must be in [0, --num_workers=%d)", index, num_workers)));
  }
  const bool kaldi = !KaldiDataFlag().empty();
  if (absl::GetFlag(FLAGS_corpus).empty() == !kaldi) {
    return Fail(absl::InvalidArgumentError(
        "give exactly one of --corpus and --kaldi_data"));
  }
  KaldiInput kaldi_train, kaldi_heldout;
  if (kaldi) {
    auto input = KaldiInputFromFlags(
        /*need_alignments=*/true, index == 0 ? MissingGlobalCmvn::kComputeAndWrite
                                             : MissingGlobalCmvn::kCompute);
    if (!input.ok()) return Fail(input.status());
    kaldi_train = *input;
    kaldi_heldout = kaldi_train;
    kaldi_heldout.data_dir = absl::GetFlag(FLAGS_kaldi_heldout_data);
    kaldi_heldout.alignments = absl::GetFlag(FLAGS_kaldi_heldout_alignments);
    if (!kaldi_heldout.data_dir.empty() && kaldi_heldout.alignments.empty()) {
      return Fail(absl::InvalidArgumentError(
          "--kaldi_heldout_data needs --kaldi_heldout_alignments"));
    }
  }
  if (absl::GetFlag(FLAGS_batch_size) < 1) {
    return Fail(absl::InvalidArgumentError("--batch_size must be >= 1"));
  }
  // adpsgd and allreduce share the setup below and branch off before the
  // Trainer; like sgd, they use the servers only for the initial model and
  // the final hand-over.
  const bool decentralized = IsDecentralizedMode(absl::GetFlag(FLAGS_mode));
  auto mode = decentralized ? absl::StatusOr<TrainMode>(TrainMode::kSgd)
                            : ParseTrainMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return Fail(mode.status());
  const bool pool = absl::GetFlag(FLAGS_minibatch_pool);
  if (*mode == TrainMode::kSync && pool) {
    return Fail(absl::InvalidArgumentError(
        "--mode=sync takes no --minibatch_pool (every worker must run the "
        "same number of steps)"));
  }
  std::string pool_run_id;
  if (pool && !decentralized) {
    const std::string path = absl::GetFlag(FLAGS_pool_run_id_file);
    if (path.empty()) {
      return Fail(absl::InvalidArgumentError(
          "--minibatch_pool needs --pool_run_id_file: a file with a secret "
          "shared by this run's workers (e.g. `umask 077; head -c 16 "
          "/dev/urandom | od -An -tx1 | tr -d ' \\n' > run_id`)"));
    }
    auto read = ReadPoolRunIdFile(path, "--pool_run_id_file");
    if (!read.ok()) return Fail(read.status());
    pool_run_id = *std::move(read);
  }
  auto addresses = ParseServerList(absl::GetFlag(FLAGS_servers));
  if (!addresses.ok()) return Fail(addresses.status());
  auto wire_dtype = ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype));
  if (!wire_dtype.ok()) return Fail(wire_dtype.status());
  std::optional<PushEncoding> push_encoding;
  if (const std::string e = absl::GetFlag(FLAGS_push_encoding); !e.empty()) {
    auto parsed = ParsePushEncoding(e);
    if (!parsed.ok()) return Fail(parsed.status());
    push_encoding = *parsed;
  }
  // A build without CUDA cannot honour --backend=cuda: say so before
  // connecting or loading the corpus (the plugin itself loads later, after
  // the metrics endpoint).
  if (absl::GetFlag(FLAGS_backend) == "cuda") {
    if (absl::Status cuda = CudaBuildStatus(); !cuda.ok()) return Fail(cuda);
  }
  SetBlasThreads(absl::GetFlag(FLAGS_blas_threads));

  // Metrics before anything else starts threads or connections.
  auto registry = std::make_shared<prometheus::Registry>();
  AddBuildInfo(*registry, "worker");
  WorkerMetrics metrics(*registry, index);
  const std::string metrics_host = absl::GetFlag(FLAGS_metrics_host);
  auto endpoint = StartMetricsFromFlags(metrics_host, registry);
  if (!endpoint.ok()) return Fail(endpoint.status());
  if (*endpoint != nullptr) {
    std::printf("worker %d: metrics on http://%s:%d/metrics\n", index,
                metrics_host.c_str(), (*endpoint)->port());
  }

  // Utterances skipped as bad data (--bad_data=skip), logged and counted.
  BadDataReporter bad_data(&std::cout, absl::StrFormat("worker %d: ", index),
                           registry.get(), index);

  // The asgd corpus, loaded whole (Kaldi data is read after connecting: how
  // it is cut depends on the model). Bad features are refused (or skipped)
  // here, before anything reaches the servers.
  std::unique_ptr<Utterances> train_utts, heldout_utts;
  int64_t all_train_frames = 0;
  int corpus_dim = 0, corpus_classes = 0;
  if (!kaldi) {
    auto read_options = CorpusReadOptionsFromFlags();
    if (!read_options.ok()) return Fail(read_options.status());
    read_options->on_skip = bad_data.Callback();
    auto corpus =
        corpus::LoadCorpus(absl::GetFlag(FLAGS_corpus), *read_options);
    if (!corpus.ok()) return Fail(corpus.status());
    // With the pool every worker holds all utterances; otherwise its own
    // part.
    train_utts = std::make_unique<Utterances>(
        Utterances::FromCorpus(corpus->info, corpus->train, pool ? 0 : index,
                               pool ? 1 : num_workers));
    heldout_utts = std::make_unique<Utterances>(
        Utterances::FromCorpus(corpus->info, corpus->heldout));
    all_train_frames = corpus->train_frames;
    std::printf(
        "worker %d: %lld training frames (%s), %lld held-out\n", index,
        static_cast<long long>(train_utts->num_frames()),
        pool ? "all, minibatches from the shared pool"
             : absl::StrFormat("part %d of %d", index, num_workers).c_str(),
        static_cast<long long>(heldout_utts->num_frames()));
    corpus_dim = corpus->info.feature_dim;
    corpus_classes = corpus->info.num_classes;
  }

  PoolClientOptions client_options;
  client_options.worker_id = index;
  auto security = SecurityOptionsFromFlags();
  if (!security.ok()) return Fail(security.status());
  client_options.security = *security;
  client_options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  client_options.rpc_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  client_options.wire_dtype = *wire_dtype;
  client_options.push_encoding = push_encoding;
  client_options.top_k_fraction = absl::GetFlag(FLAGS_top_k_fraction);
  client_options.delta_pulls = absl::GetFlag(FLAGS_delta_pulls);
  auto client = ConnectToPool(*addresses, client_options);
  if (!client.ok()) return Fail(client.status());
  const ModelSpec spec = (*client)->model();
  DataOptions data;
  data.chunk_frames = absl::GetFlag(FLAGS_chunk_frames);
  data.left_context = absl::GetFlag(FLAGS_chunk_left_context);
  data.right_context = absl::GetFlag(FLAGS_chunk_right_context);
  std::unique_ptr<ExampleSet> train, heldout;
  OpenBatchSource open_source;  // streamed Kaldi data
  KaldiWorkerData kaldi_data;
  if (kaldi) {
    kaldi_train.on_skip = kaldi_heldout.on_skip = bad_data.Callback();
    auto prepared = PrepareKaldiWorkerData(kaldi_train, kaldi_heldout, spec,
                                           data, index, num_workers, pool);
    if (!prepared.ok()) return Fail(prepared.status());
    kaldi_data = *std::move(prepared);
    train = std::move(kaldi_data.train);
    heldout = std::move(kaldi_data.heldout);
    open_source = kaldi_data.open_source;
    all_train_frames = kaldi_data.all_frames;
    std::printf("worker %d: %s; global CMVN: %s\n", index,
                kaldi_data.summary.c_str(),
                kaldi_train.global_cmvn_source.c_str());
  } else {
    if (absl::Status s = CheckDataFitsModel(corpus_dim, corpus_classes, spec);
        !s.ok()) {
      return Fail(s);
    }
    auto made = MakeExamples(spec, train_utts.get(), data);
    if (!made.ok()) return Fail(made.status());
    train = *std::move(made);
    made = MakeExamples(spec, heldout_utts.get(), data);
    if (!made.ok()) return Fail(made.status());
    heldout = *std::move(made);
  }
  const BatchShape shape = ShapeOfBatch(*train, absl::GetFlag(FLAGS_batch_size));

  CudaOptions cuda_options;
  cuda_options.device = absl::GetFlag(FLAGS_cuda_device);
  auto math = ParseCudaMathMode(absl::GetFlag(FLAGS_cuda_math));
  if (!math.ok()) return Fail(math.status());
  cuda_options.math = *math;
  std::string note;
  auto backend = CreateBackend(absl::GetFlag(FLAGS_backend), spec,
                               shape.rows(), &note, cuda_options);
  if (!backend.ok()) return Fail(backend.status());
  if (!note.empty()) std::printf("worker %d: %s\n", index, note.c_str());
  std::printf(
      "worker %d: connected to %zu servers, model %s, %lld params, backend "
      "%s, minibatches of %d x %d rows\n",
      index, addresses->size(), DescribeModel(spec).c_str(),
      static_cast<long long>((*client)->layout().total_size()),
      std::string((*backend)->name()).c_str(), shape.examples, shape.steps);
  std::fflush(stdout);

  LoopOptions loop;
  loop.observer = &metrics;
  loop.worker_index = index;
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
      "%s %s, %s", kaldi ? "Kaldi data" : "corpus",
      kaldi ? kaldi_train.data_dir : absl::GetFlag(FLAGS_corpus),
      pool ? std::string("minibatches from the shared pool")
           : absl::StrFormat("part %d of %d", index, num_workers));
  // Lockstep modes (sync, allreduce): every worker runs the same number of
  // steps, from the whole training set's size, so none waits for a finished
  // one.
  const int64_t lockstep_steps =
      LockstepSteps(loop.epochs, all_train_frames, num_workers,
                    shape.examples * train->max_labelled_steps());
  if (decentralized) {
    const int rc = RunDecentralized(loop, num_workers, lockstep_steps,
                                    *registry, client->get(), backend->get(),
                                    spec, train.get(), open_source,
                                    heldout.get(), *security);
    LogBadData(index, bad_data);
    return rc;
  }
  TrainerOptions options;
  options.mode = *mode;
  options.push_every = absl::GetFlag(FLAGS_push_every);
  options.compute_while_pushing =
      *mode == TrainMode::kAsgd && absl::GetFlag(FLAGS_compute_while_pushing);
  options.max_minibatches_per_push = absl::GetFlag(FLAGS_max_minibatches_per_push);
  options.overlap_pulls =
      *mode == TrainMode::kAsgd && absl::GetFlag(FLAGS_overlap_pulls);
  options.max_overlapped_steps = absl::GetFlag(FLAGS_max_overlapped_steps);
  options.use_pool = pool;
  options.pool_seed = absl::GetFlag(FLAGS_pool_seed);
  options.pool_run_id = pool_run_id;
  options.warm_start_epochs = absl::GetFlag(FLAGS_warm_start_epochs);
  options.local_learning_rate = absl::GetFlag(FLAGS_local_learning_rate);
  options.open_source = open_source;
  if (*mode == TrainMode::kSync) {
    options.push_every = 1;
    if (loop.max_steps == 0) loop.max_steps = lockstep_steps;
    loop.epochs = 0;
  }
  options.loop = loop;
  Trainer trainer(client->get(), backend->get(), train.get(), heldout.get(),
                  options, &std::cout);
  auto result = trainer.Run();
  LogBadData(index, bad_data);
  if (!result.ok()) return Fail(result.status());
  LogSummary(&std::cout, index, *result,
             absl::StrFormat(", %d pushes dropped as stale, %d refused busy",
                             result->pushes_dropped, result->pushes_busy));
  if (const std::string path = absl::GetFlag(FLAGS_save_model); !path.empty()) {
    if (absl::Status s = SaveModel(path, spec, result->params); !s.ok()) {
      return Fail(s);
    }
    std::printf("worker %d: saved model to %s\n", index, path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd worker: trains the acoustic model (DNN, CNN, LSTM, BLSTM) held "
      "by an asgd server pool with asynchronous SGD, or with its peers "
      "(--mode).\nExample: asgd_worker "
      "--servers=127.0.0.1:5001,127.0.0.1:5002 --corpus=/tmp/asgd-corpus "
      "--worker_index=0 --num_workers=2");
  return asgd::Run();
}
