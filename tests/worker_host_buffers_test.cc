// How many model-sized buffers a worker keeps in host memory while it
// trains, counted by the allocator. Every block of at least a quarter of the
// model's bytes that malloc hands out while a run is counted is recorded
// while it lives, with the stack that asked for it, unless it was asked for
// inside a call to the backend: that is the backend's own memory, where the
// CPU backend keeps what the CUDA backend keeps on the GPU (the resident
// model and its sum, the 1-bit residual, the mirrors of the model buffers)
// and the exact copies it makes. The servers run in a child process, forked
// before this process starts gRPC, so only the worker is counted.
//
// What it shows, for a DNN of 6.6 M parameters through two servers with
// background pushes and prefetched pulls:
//   * the GPU worker's configuration (the backend holds the model, the
//     client's exact copies live on the backend as --replay_on_device keeps
//     them, 1-bit pushes) keeps two model-sized host buffers: the model it
//     trains from and the one the prefetcher pulls into;
//   * with float32 pushes, three (the average the push is sent from); with
//     bf16 pushes, two and a half;
//   * the host model path (gradients, their sum, the error-feedback
//     residuals and the exact copies in host memory) keeps several more.
// Each configuration's buffers and where they were made are printed.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/debugging/stacktrace.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/wire_codec.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/cuda/host_replay_copy.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "worker/data/make_examples.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"
#include "worker/ps/grpc_param_client.h"
#include "worker/ps/trainer.h"

// glibc's allocator, under the names it exports for wrappers like these.
extern "C" {
void* __libc_malloc(size_t size);
void __libc_free(void* p);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace asgd {
namespace census {

constexpr int kMaxLive = 256;
constexpr int kFrames = 32;

struct Block {
  void* p = nullptr;
  size_t size = 0;
  bool backend = false;  // asked for inside a backend call
  int frames = 0;
  void* stack[kFrames];
};

// 0: not counting. Read before anything else, so that allocations before
// main (and in the servers' process) never touch the state below.
std::atomic<size_t> g_threshold{0};
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
Block g_live[kMaxLive];
int g_count = 0;
bool g_overflow = false;
size_t g_host_bytes = 0;  // live, outside the backend
size_t g_peak_bytes = 0;
Block g_peak[kMaxLive];  // the host blocks alive at the peak
int g_peak_count = 0;

__attribute__((tls_model("initial-exec"))) thread_local int t_backend_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local bool t_busy = false;

void Lock() {
  while (g_lock.test_and_set(std::memory_order_acquire)) {
  }
}
void Unlock() { g_lock.clear(std::memory_order_release); }

void Record(void* p, size_t size) {
  const size_t threshold = g_threshold.load(std::memory_order_relaxed);
  if (threshold == 0 || p == nullptr || size < threshold || t_busy) return;
  t_busy = true;  // the stack walk may allocate
  Block b;
  b.p = p;
  b.size = size;
  b.backend = t_backend_depth > 0;
  b.frames = absl::GetStackTrace(b.stack, kFrames, 2);
  Lock();
  if (g_count == kMaxLive) {
    g_overflow = true;
  } else {
    g_live[g_count++] = b;
    if (!b.backend) {
      g_host_bytes += size;
      if (g_host_bytes > g_peak_bytes) {
        g_peak_bytes = g_host_bytes;
        g_peak_count = 0;
        for (int i = 0; i < g_count; ++i) {
          if (!g_live[i].backend) g_peak[g_peak_count++] = g_live[i];
        }
      }
    }
  }
  Unlock();
  t_busy = false;
}

void Forget(void* p) {
  if (g_threshold.load(std::memory_order_relaxed) == 0 || p == nullptr) return;
  Lock();
  for (int i = 0; i < g_count; ++i) {
    if (g_live[i].p != p) continue;
    if (!g_live[i].backend) g_host_bytes -= g_live[i].size;
    g_live[i] = g_live[--g_count];
    break;
  }
  Unlock();
}

void Start(size_t threshold) {
  Lock();
  g_count = 0;
  g_overflow = false;
  g_host_bytes = g_peak_bytes = 0;
  g_peak_count = 0;
  Unlock();
  g_threshold.store(threshold);
}

struct Result {
  size_t peak_bytes = 0;
  std::vector<Block> blocks;  // the host blocks alive at the peak
  bool overflow = false;
};

Result Stop() {
  g_threshold.store(0);
  Lock();
  Result r;
  r.peak_bytes = g_peak_bytes;
  r.blocks.assign(g_peak, g_peak + g_peak_count);
  r.overflow = g_overflow;
  Unlock();
  return r;
}

// Marks the calls into the backend: what they allocate is its memory.
class InBackend {
 public:
  InBackend() { ++t_backend_depth; }
  ~InBackend() { --t_backend_depth; }
};

// Where a block was asked for: the first frames of asgd's own code.
std::string Where(const Block& b) {
  std::vector<std::string> names;
  char name[1024];
  for (int i = 0; i < b.frames && names.size() < 3; ++i) {
    if (!absl::Symbolize(b.stack[i], name, sizeof(name))) continue;
    std::string s =
        absl::StrReplaceAll(name, {{"(anonymous namespace)::", ""}});
    if (s.rfind("asgd::", 0) != 0) continue;
    names.push_back(s.substr(0, s.find('(')));
  }
  return names.empty() ? "(unknown)" : absl::StrJoin(names, " < ");
}

}  // namespace census
}  // namespace asgd

// Every allocation of the process goes through these (operator new too).
extern "C" {
void* malloc(size_t size) {
  void* p = __libc_malloc(size);
  asgd::census::Record(p, size);
  return p;
}
void free(void* p) {
  asgd::census::Forget(p);
  __libc_free(p);
}
void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  asgd::census::Record(p, n * size);
  return p;
}
void* realloc(void* p, size_t size) {
  asgd::census::Forget(p);
  void* q = __libc_realloc(p, size);
  asgd::census::Record(q, size);
  return q;
}
void* aligned_alloc(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  asgd::census::Record(p, size);
  return p;
}
void* memalign(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  asgd::census::Record(p, size);
  return p;
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  asgd::census::Record(p, size);
  *out = p;
  return 0;
}
}

namespace asgd {
namespace {

using census::InBackend;

// 12 x 2560 x 2560 x 3: 6.6 M parameters (26 MB), so that a quarter of the
// model (the census's threshold) is larger than a pull's or a push's chunk
// (1 MB) and than the largest socket read gRPC makes (4 MB), and smaller
// than either server's slice.
ModelSpec BigToyModel() {
  ModelSpec spec = ToyModel("dnn");
  spec.layers = {LayerSpec::Dense(2560, Activation::kRelu),
                 LayerSpec::Dense(2560, Activation::kRelu)};
  return spec;
}

// The CPU backend, every call marked as the backend's (what it allocates
// is its own memory); the resident model is the base class's, on the host.
class MarkedBackend final : public ModelBackend {
 public:
  explicit MarkedBackend(std::unique_ptr<ModelBackend> inner)
      : inner_(std::move(inner)) {}
  absl::string_view name() const override { return inner_->name(); }
  const ModelSpec& spec() const override { return inner_->spec(); }
  int max_rows() const override { return inner_->max_rows(); }
  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    InBackend in;
    return inner_->ComputeGradient(params, batch, grad);
  }
  absl::Status LogPosteriors(absl::Span<const float> params, const Batch& batch,
                             absl::Span<float> out) override {
    InBackend in;
    return inner_->LogPosteriors(params, batch, out);
  }
  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    InBackend in;
    return inner_->Predict(params, batch, out);
  }
  absl::Status LoadModel(absl::Span<const float> params) override {
    InBackend in;
    return ModelBackend::LoadModel(params);
  }
  absl::Status PinHostBuffer(absl::Span<const float> buffer) override {
    InBackend in;
    return ModelBackend::PinHostBuffer(buffer);
  }
  void UnpinHostBuffer(absl::Span<const float> buffer) override {
    InBackend in;
    ModelBackend::UnpinHostBuffer(buffer);
  }
  absl::StatusOr<BatchResult> AccumulateGradient(const Batch& batch) override {
    InBackend in;
    return ModelBackend::AccumulateGradient(batch);
  }
  void StageNext(const Batch& next) override {
    InBackend in;
    ModelBackend::StageNext(next);
  }
  absl::Status TakeAverage(absl::Span<float> out) override {
    InBackend in;
    return ModelBackend::TakeAverage(out);
  }
  absl::Status TakeBf16(absl::Span<uint16_t> out) override {
    InBackend in;
    return ModelBackend::TakeBf16(out);
  }
  absl::Status TakeOneBit(const OneBitPlan& plan,
                          absl::Span<char> out) override {
    InBackend in;
    return ModelBackend::TakeOneBit(plan, out);
  }
  absl::Status TakeTopK(const TopKPlan& plan,
                        std::vector<std::string>* out) override {
    InBackend in;
    return ModelBackend::TakeTopK(plan, out);
  }
  absl::Status RestoreResidual(int64_t flat_begin,
                               absl::Span<const float> values) override {
    InBackend in;
    return ModelBackend::RestoreResidual(flat_begin, values);
  }
  absl::Status ReadResidual(absl::Span<float> out) override {
    InBackend in;
    return ModelBackend::ReadResidual(out);
  }
  absl::Status MirrorFromCopy(absl::Span<float> buffer, int64_t begin,
                              const ExactCopy& copy) override {
    InBackend in;
    return ModelBackend::MirrorFromCopy(buffer, begin, copy);
  }
  absl::Status DownloadMirror(absl::Span<float> buffer, int64_t begin,
                              int64_t count) override {
    InBackend in;
    return ModelBackend::DownloadMirror(buffer, begin, count);
  }
  absl::Status LoadMirroredModel(absl::Span<const float> buffer) override {
    InBackend in;
    return ModelBackend::LoadMirroredModel(buffer);
  }

 private:
  std::unique_ptr<ModelBackend> inner_;
};

// A host exact copy standing for a device one: its calls are the backend's.
class MarkedCopy final : public ExactCopy {
 public:
  explicit MarkedCopy(std::unique_ptr<ExactCopy> inner)
      : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  absl::Status Upload(absl::Span<const float> host,
                      absl::Span<const uint8_t> keep) override {
    InBackend in;
    return inner_->Upload(host, keep);
  }
  absl::Status Download(absl::Span<float> host) const override {
    InBackend in;
    return inner_->Download(host);
  }
  absl::Status Replay(const ReplayPlan& plan, float lr, float wd) override {
    InBackend in;
    return inner_->Replay(plan, lr, wd);
  }
  int64_t last_upload_bytes() const override {
    return inner_->last_upload_bytes();
  }

 private:
  std::unique_ptr<ExactCopy> inner_;
};

// The servers, in a child process forked before this one starts gRPC.
struct ServerProcess {
  pid_t pid = -1;
  int keep_alive = -1;  // the child runs until this closes
  std::vector<std::string> addresses;
};
ServerProcess* g_servers = nullptr;

ServerProcess ForkServers(const ModelSpec& spec) {
  int up[2], down[2];
  if (pipe(up) != 0 || pipe(down) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    std::vector<std::unique_ptr<GrpcServer>> servers;
    std::string line;
    for (int s = 0; s < 2; ++s) {
      ParamStoreOptions o;
      SetModel(spec, &o);
      o.server_index = s;
      o.num_servers = 2;
      o.num_shards = 2;
      o.optimizer.learning_rate = 0.01f;
      o.compressed_pushes = true;
      auto server =
          GrpcServer::Start(o, InitialParams(spec, 1), "127.0.0.1", 0);
      if (!server.ok()) {
        line = "error " + std::string(server.status().message());
        break;
      }
      absl::StrAppend(&line, s > 0 ? " " : "", (*server)->local_address());
      servers.push_back(*std::move(server));
    }
    line += "\n";
    if (write(up[1], line.data(), line.size()) < 0) _exit(1);
    char c;
    while (read(down[0], &c, 1) > 0) {
    }
    _exit(0);  // the servers' threads end with the process
  }
  close(up[1]);
  close(down[0]);
  ServerProcess p;
  p.pid = pid;
  p.keep_alive = down[1];
  std::string line;
  char c;
  while (read(up[0], &c, 1) == 1 && c != '\n') line += c;
  close(up[0]);
  if (line.rfind("error", 0) == 0 || line.empty()) {
    fprintf(stderr, "servers did not start: %s\n", line.c_str());
    return p;
  }
  p.addresses = absl::StrSplit(line, ' ');
  return p;
}

struct Census {
  double model_units = 0;  // peak host bytes / model bytes
  std::vector<census::Block> blocks;
  std::string report;
};

// One run of 12 minibatches with background pushes and prefetched pulls.
Census TrainAndCount(PushEncoding encoding, bool resident,
                     bool copies_on_backend) {
  const ModelSpec spec = BigToyModel();
  const size_t model_bytes = ModelParamCount(spec) * sizeof(float);
  Census c;
  if (g_servers == nullptr || g_servers->addresses.size() != 2) {
    ADD_FAILURE() << "no servers";
    return c;
  }
  const Utterances train_utts = ToyUtterances(1);
  const Utterances heldout_utts = ToyUtterances(2);
  auto train = MakeExamples(spec, &train_utts, ToyDataOptions());
  auto heldout = MakeExamples(spec, &heldout_utts, ToyDataOptions());
  EXPECT_TRUE(train.ok() && heldout.ok());
  TrainerOptions o;
  o.loop.batch_size = 16;
  o.loop.max_steps = 12;
  o.loop.log_every = 0;
  o.loop.eval_every = 4;
  o.push_every = 1;
  o.compute_while_pushing = true;
  o.overlap_pulls = true;
  o.resident_model = resident;
  auto cpu =
      CreateCpuBackend(spec, ShapeOfBatch(**train, o.loop.batch_size).rows());
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  if (!cpu.ok()) return c;
  MarkedBackend backend(*std::move(cpu));

  census::Start(model_bytes / 4);
  {
    PoolClientOptions co;
    co.push_encoding = encoding;
    auto client = GrpcParamClient::Create(g_servers->addresses, co);
    EXPECT_TRUE(client.ok()) << client.status();
    if (client.ok()) {
      if (copies_on_backend) {
        const absl::Status kept =
            (*client)->KeepExactCopiesOn([](int64_t count) {
              InBackend in;
              absl::StatusOr<std::unique_ptr<ExactCopy>> copy =
                  CreateHostReplayCopy(count);
              if (!copy.ok()) return copy;
              return absl::StatusOr<std::unique_ptr<ExactCopy>>(
                  std::make_unique<MarkedCopy>(*std::move(copy)));
            });
        EXPECT_TRUE(kept.ok()) << kept;
      }
      Trainer trainer(client->get(), &backend, train->get(), heldout->get(), o,
                      nullptr);
      const absl::StatusOr<TrainResult> result = trainer.Run();
      EXPECT_TRUE(result.ok()) << result.status();
      // Minibatches that come while a push is on the wire may share the
      // next one (at most 4).
      if (result.ok()) {
        EXPECT_EQ(result->steps, 12);
        EXPECT_GE(result->pushes, 3);
      }
    }
  }
  const census::Result r = census::Stop();
  EXPECT_FALSE(r.overflow) << "more blocks alive than the census holds";
  c.model_units = static_cast<double>(r.peak_bytes) / model_bytes;
  c.blocks = r.blocks;
  c.report = absl::StrFormat(
      "%s pushes, %s model, %s copies: peak %.2f models in host memory "
      "(%zu bytes a model)\n",
      PushEncodingName(encoding), resident ? "resident" : "host",
      copies_on_backend ? "backend" : "host", c.model_units, model_bytes);
  for (const census::Block& b : r.blocks) {
    absl::StrAppendFormat(&c.report, "  %.2f models: %s\n",
                          static_cast<double>(b.size) / model_bytes,
                          census::Where(b));
  }
  return c;
}

TEST(WorkerHostBuffersTest, AGpuConfigurationWorkerKeepsTwoModelsOnTheHost) {
  const Census c = TrainAndCount(PushEncoding::kOneBit, /*resident=*/true,
                                 /*copies_on_backend=*/true);
  printf("%s", c.report.c_str());
  // The model trained from and the prefetcher's: exactly two models.
  EXPECT_EQ(c.blocks.size(), 2u) << c.report;
  EXPECT_NEAR(c.model_units, 2.0, 1e-9) << c.report;
}

TEST(WorkerHostBuffersTest, Float32PushesAddTheAverageTheyAreSentFrom) {
  const Census c = TrainAndCount(PushEncoding::kFloat32, /*resident=*/true,
                                 /*copies_on_backend=*/true);
  printf("%s", c.report.c_str());
  EXPECT_NEAR(c.model_units, 3.0, 1e-9) << c.report;
}

TEST(WorkerHostBuffersTest, Bf16PushesAddHalfAModel) {
  const Census c = TrainAndCount(PushEncoding::kBfloat16, /*resident=*/true,
                                 /*copies_on_backend=*/true);
  printf("%s", c.report.c_str());
  // The two models and the rounded push (two bytes an element).
  EXPECT_NEAR(c.model_units, 2.5, 1e-9) << c.report;
}

TEST(WorkerHostBuffersTest, TheHostModelPathKeepsMore) {
  const Census host = TrainAndCount(PushEncoding::kOneBit, /*resident=*/false,
                                    /*copies_on_backend=*/false);
  printf("%s", host.report.c_str());
  const Census host_copies_on_backend =
      TrainAndCount(PushEncoding::kOneBit, /*resident=*/true,
                    /*copies_on_backend=*/false);
  printf("%s", host_copies_on_backend.report.c_str());
  // Gradients, their sum, the residuals and the exact copies: at least
  // four models more than the GPU configuration's two.
  EXPECT_GE(host.model_units, 6.0) << host.report;
  // The resident model alone leaves the exact copies on the host (one
  // model over the two servers' slices).
  EXPECT_NEAR(host_copies_on_backend.model_units, 3.0, 1e-9)
      << host_copies_on_backend.report;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::InitializeSymbolizer(argv[0]);
  ::testing::InitGoogleTest(&argc, argv);
  // Before anything in this process starts gRPC.
  asgd::ServerProcess servers = asgd::ForkServers(asgd::BigToyModel());
  asgd::g_servers = &servers;
  const int rc = RUN_ALL_TESTS();
  if (servers.pid > 0) {
    close(servers.keep_alive);
    int status = 0;
    waitpid(servers.pid, &status, 0);
  }
  return rc;
}
