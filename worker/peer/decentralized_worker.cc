#include "worker/peer/decentralized_worker.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/peer/peer_grpc_client.h"
#include "worker/peer/peer_grpc_service.h"
#include "worker/peer/peer_model.h"

namespace asgd {

absl::StatusOr<std::vector<std::string>> ParsePeerList(
    const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part :
       absl::StrSplit(text, absl::ByAnyChar(", \t\r\n"), absl::SkipEmpty())) {
    const size_t colon = part.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad peer address '", part, "' (want host:port)"));
    }
    out.emplace_back(part);
  }
  if (out.empty()) return absl::InvalidArgumentError("no peer addresses");
  return out;
}

absl::StatusOr<std::vector<std::string>> WaitForPeersFile(
    const std::string& path, int num_workers, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last =
      absl::NotFoundError(absl::StrCat(path, " does not exist"));
  for (;;) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      absl::StatusOr<std::vector<std::string>> peers =
          ParsePeerList(text.str());
      if (peers.ok() && static_cast<int>(peers->size()) == num_workers) {
        return peers;
      }
      last = peers.ok() ? absl::InvalidArgumentError(
                              absl::StrCat(path, " lists ", peers->size(),
                                           " peers, want ", num_workers))
                        : peers.status();
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("waited ", absl::FormatDuration(timeout),
                       " for the peers file: ", last.message()));
    }
    absl::SleepFor(
        absl::Milliseconds(50));  // polling a file another process writes
  }
}

namespace {

absl::Status CheckWorkerOptions(const DecentralizedWorkerOptions& options,
                                const ParamClient& servers,
                                const ModelBackend& backend) {
  const int index = options.decentralized.loop.worker_index;
  const int n = options.num_workers;
  if (n < 1 || index < 0 || index >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker index ", index, " outside [0, ", n, ")"));
  }
  if (n > 1 && !options.resolve_peers) {
    return absl::InvalidArgumentError(
        "a decentralized run of several workers needs their peer addresses");
  }
  if (ModelParamCount(backend.spec()) != servers.layout().total_size()) {
    return absl::FailedPreconditionError(
        "the backend's model is not the pool's model");
  }
  return absl::OkStatus();
}

PeerServerOptions ServerOptionsOf(const DecentralizedWorkerOptions& options,
                                  const DecentralizedOptions& decentralized,
                                  const ModelLayout& layout) {
  PeerServerOptions server_options;
  server_options.host = options.peer_host;
  server_options.port = options.peer_port;
  server_options.group.worker_index = decentralized.loop.worker_index;
  server_options.group.num_workers = options.num_workers;
  server_options.group.layout_fingerprint = layout.Fingerprint();
  server_options.group.mode = DecentralizedModeName(decentralized.mode);
  if (decentralized.mode == DecentralizedMode::kAdpsgd) {
    server_options.group.topology = TopologyName(decentralized.adpsgd.topology);
    server_options.group.topology_seed = decentralized.adpsgd.topology_seed;
  }
  server_options.security = options.security;
  server_options.max_chunk_elements = options.max_chunk_elements;
  return server_options;
}

// The other workers: none for one worker, else connected at `addresses`.
absl::StatusOr<std::unique_ptr<PeerClient>> JoinGroup(
    const DecentralizedWorkerOptions& options, const PeerGroup& group,
    const std::vector<std::string>& addresses, const ModelLayout* layout) {
  if (options.num_workers == 1) {
    return std::unique_ptr<PeerClient>(std::make_unique<NoPeers>());
  }
  GrpcPeerClientOptions client_options;
  client_options.group = group;
  client_options.security = options.security;
  client_options.connect_timeout = options.connect_timeout;
  client_options.average_timeout = options.average_timeout;
  client_options.send_timeout = options.send_timeout;
  client_options.max_chunk_elements = options.max_chunk_elements;
  ASGD_ASSIGN_OR_RETURN(
      std::unique_ptr<GrpcPeerClient> peers,
      GrpcPeerClient::Create(addresses, layout, client_options));
  return std::unique_ptr<PeerClient>(std::move(peers));
}

// The closing lines: the held-out evaluation of the final model and the
// peers' counts.
absl::Status EvaluateAndLog(const DecentralizedOptions& decentralized,
                            ModelBackend* backend, const ExampleSet* heldout,
                            absl::Time train_start, std::ostream* log,
                            DecentralizedWorkerResult* result) {
  const int index = decentralized.loop.worker_index;
  TrainResult& r = result->run.train;
  auto say = [&](const std::string& line) {
    if (log != nullptr) *log << line << std::endl;
  };
  if (heldout != nullptr && heldout->num_examples() > 0) {
    ASGD_ASSIGN_OR_RETURN(
        result->heldout_accuracy,
        EvaluateAccuracy(backend, r.params, *heldout,
                         std::max(1, backend->max_rows() / heldout->steps())));
    r.heldout_accuracy = result->heldout_accuracy;
    say(absl::StrFormat(
        "worker %d eval t=%.1f frames=%d version=%d held-out frame accuracy: "
        "%.1f%%",
        index, absl::ToDoubleSeconds(absl::Now() - train_start), r.frames,
        r.steps, 100 * result->heldout_accuracy));
  }
  if (decentralized.mode == DecentralizedMode::kAdpsgd) {
    const AverageStats& a = result->run.averages;
    say(absl::StrFormat(
        "worker %d peers: %d averages started (%d failed, %d skipped), %d "
        "answered, last consensus distance %.4g",
        index, a.ok + a.failed + a.skipped, a.failed, a.skipped,
        result->averages_served, a.last_distance));
  } else {
    say(absl::StrFormat("worker %d peers: %d allreduces", index,
                        result->run.allreduces));
  }
  LogSummary(log, index, r,
             absl::StrCat(", mode ", DecentralizedModeName(decentralized.mode)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecentralizedWorkerResult> RunDecentralizedWorker(
    const DecentralizedWorkerOptions& options, ParamClient* servers,
    ModelBackend* backend, const ExampleSet* train, const ExampleSet* heldout,
    std::ostream* log) {
  ASGD_RETURN_IF_ERROR(CheckWorkerOptions(options, *servers, *backend));
  const int index = options.decentralized.loop.worker_index;
  const int n = options.num_workers;
  const ModelLayout& layout = servers->layout();
  DecentralizedOptions decentralized = options.decentralized;
  ASGD_ASSIGN_OR_RETURN(decentralized.learning_rate,
                        LocalLearningRate(options.local_learning_rate,
                                          servers->attributes()));
  const bool adpsgd = decentralized.mode == DecentralizedMode::kAdpsgd;
  const std::string mode = DecentralizedModeName(decentralized.mode);
  auto say = [&](const std::string& line) {
    if (log != nullptr) *log << line << std::endl;
  };

  // 1. The servers' initial model.
  std::vector<float> params(layout.total_size());
  std::vector<uint64_t> versions;
  ASGD_RETURN_IF_ERROR(servers->Pull(absl::MakeSpan(params), &versions));
  PeerModel model(params);
  std::optional<AllreduceMailbox> mailbox;
  if (!adpsgd) mailbox.emplace(index, n, layout.total_size());

  // 2. The peer service.
  const PeerServerOptions server_options =
      ServerOptionsOf(options, decentralized, layout);
  ASGD_ASSIGN_OR_RETURN(
      std::unique_ptr<PeerServer> server,
      PeerServer::Start(server_options, &layout, adpsgd ? &model : nullptr,
                        mailbox.has_value() ? &*mailbox : nullptr,
                        decentralized.peer_observer));
  say(absl::StrFormat(
      "worker %d: peer service on %s:%d (%s%s)", index, options.peer_host,
      server->port(), mode,
      adpsgd ? absl::StrCat(", ", server_options.group.topology,
                            decentralized.delay_by_one ? ", delay-by-one" : "")
             : ""));

  // 3. The group.
  std::vector<std::string> addresses;
  if (options.resolve_peers) {
    ASGD_ASSIGN_OR_RETURN(addresses, options.resolve_peers(server->port()));
  }
  ASGD_ASSIGN_OR_RETURN(
      std::unique_ptr<PeerClient> peers,
      JoinGroup(options, server_options.group, addresses, &layout));
  if (n > 1) {
    say(absl::StrFormat("worker %d: all %d workers ready: %s", index, n,
                        absl::StrJoin(addresses, ",")));
  }

  // 4. Training.
  const absl::Time train_start = absl::Now();
  DecentralizedTrainer trainer(
      &model, peers.get(), mailbox.has_value() ? &*mailbox : nullptr, backend,
      train, heldout, decentralized, log);
  absl::StatusOr<DecentralizedResult> run = trainer.Run();
  if (!run.ok()) return run.status();  // `server` shuts down on the way out

  // 5. The end barrier: answer averages until everyone is done.
  DecentralizedWorkerResult result;
  result.run = *std::move(run);
  TrainResult& r = result.run.train;
  server->MarkDone(r.steps);
  const absl::Time barrier_start = absl::Now();
  result.unconfirmed = peers->AwaitPeersDone(options.finish_timeout);
  const double waited = absl::ToDoubleSeconds(absl::Now() - barrier_start);
  if (!result.unconfirmed.empty()) {
    say(absl::StrFormat(
        "worker %d: workers %s still not done after %.0f s; finishing without "
        "them",
        index, absl::StrJoin(result.unconfirmed, ","), waited));
  }
  model.Read(absl::MakeSpan(r.params));
  result.averages_served = server->service()->averages_served();
  server->Shutdown();

  // 6. The final model: to the servers (worker 0), and evaluated.
  if (index == 0) {
    ASGD_RETURN_IF_ERROR(
        servers->Push(r.params, versions, 1, PushKind::kAssign).status());
    say(absl::StrFormat(
        "worker 0: final model handed to the servers (waited %.1f s for the "
        "other workers)",
        waited));
  }
  ASGD_RETURN_IF_ERROR(EvaluateAndLog(decentralized, backend, heldout,
                                      train_start, log, &result));
  return result;
}

}  // namespace asgd
