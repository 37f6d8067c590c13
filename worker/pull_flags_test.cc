// --replay_on_device: off, nothing is asked of the client; on, the client
// is handed the backend's CreateExactCopy, and a backend that keeps no
// copies (the CPU backend) or a client without delta pulls is refused with
// InvalidArgument; the factory's own errors keep their code.
#include "worker/pull_flags.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/model_spec.h"

ABSL_DECLARE_FLAG(bool, replay_on_device);

namespace asgd {
namespace {

// A client that keeps copies from the factory it is handed (one of
// `count` floats), or refuses copies altogether (`delta` false).
class CopyClient final : public ParamClient {
 public:
  explicit CopyClient(bool delta)
      : delta_(delta), layout_(*ModelLayout::Create({{"w", {100}}}, 1, 1)) {}

  absl::Status KeepExactCopiesOn(const ExactCopyFactory& factory) override {
    ++calls;
    if (!delta_) return ParamClient::KeepExactCopiesOn(factory);
    absl::StatusOr<std::unique_ptr<ExactCopy>> copy = factory(100);
    if (!copy.ok()) return copy.status();
    return absl::OkStatus();
  }

  const ModelLayout& layout() const override { return layout_; }
  const ModelSpec& model() const override { return spec_; }
  const std::map<std::string, std::string>& attributes() const override {
    return attributes_;
  }
  absl::Status Pull(PullSink*, std::vector<uint64_t>*) override {
    return absl::UnimplementedError("not in this test");
  }
  std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>&, const std::vector<uint64_t>&,
      int) override {
    return {};
  }
  absl::StatusOr<PushOutcome> Push(absl::Span<const float>,
                                   const std::vector<uint64_t>&, int,
                                   PushKind) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<std::vector<uint64_t>> Versions() override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<PoolGrant> FetchBatches(const std::string&, uint64_t, int,
                                         double, int) override {
    return absl::UnimplementedError("not in this test");
  }

  DeltaPullStats delta_pull_stats() const override { return stats; }

  int calls = 0;
  DeltaPullStats stats;

 private:
  const bool delta_;
  ModelLayout layout_;
  ModelSpec spec_;
  std::map<std::string, std::string> attributes_;
};

std::unique_ptr<ModelBackend> CpuBackend() {
  ModelSpec spec;
  spec.feature_dim = 4;
  spec.num_classes = 3;
  spec.layers = {LayerSpec::Dense(5, Activation::kRelu)};
  return *CreateCpuBackend(spec, 8);
}

TEST(ReplayOnDeviceFlagTest, OffAsksNothing) {
  absl::SetFlag(&FLAGS_replay_on_device, false);
  auto backend = CpuBackend();
  CopyClient client(/*delta=*/true);
  EXPECT_TRUE(ReplayOnDeviceFromFlags(backend.get(), &client).ok());
  EXPECT_EQ(client.calls, 0);
}

TEST(ReplayOnDeviceFlagTest, TheCpuBackendOrNoDeltaPullsAreRefused) {
  absl::SetFlag(&FLAGS_replay_on_device, true);
  auto backend = CpuBackend();
  EXPECT_EQ(backend->CreateExactCopy(10).status().code(),
            absl::StatusCode::kUnimplemented);
  for (bool delta : {true, false}) {
    CopyClient client(delta);
    const absl::Status s = ReplayOnDeviceFromFlags(backend.get(), &client);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(client.calls, 1);
  }
  absl::SetFlag(&FLAGS_replay_on_device, false);
}

TEST(DeltaPullSummaryTest, SaysWhereTheUpdatesWereReplayed) {
  CopyClient client(/*delta=*/true);
  EXPECT_EQ(DeltaPullSummary(client), "");  // no delta pulls
  client.stats.weight_pulls = 2;
  EXPECT_EQ(DeltaPullSummary(client), "");  // weights only, on the host
  client.stats.update_pulls = 812;
  client.stats.update_bytes = 35'200'000;
  EXPECT_EQ(DeltaPullSummary(client),
            ", delta pulls: 812 of updates (35.2 MB), 2 with weights, "
            "replayed on the CPU");
  client.stats.copies_elsewhere = true;
  client.stats.plan_bytes = 40'100'000;
  EXPECT_EQ(DeltaPullSummary(client),
            ", delta pulls: 812 of updates (35.2 MB), 2 with weights, "
            "replayed on the device (plans 40.1 MB)");
}

}  // namespace
}  // namespace asgd
