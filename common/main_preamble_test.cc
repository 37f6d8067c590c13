// The shared start of the service binaries: the build info in the
// registry, the endpoint only when --metrics_port asks for one, and its URL.
#include "common/main_preamble.h"

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "common/metrics_testing.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(int, metrics_port);

namespace asgd {
namespace {

TEST(MainPreambleTest, TheRegistryHoldsTheBuildInfo) {
  ProcessMetrics metrics("worker");
  EXPECT_EQ(MetricValue(metrics.registry(), "asgd_build_info", "component",
                        "worker"),
            1);
}

TEST(MainPreambleTest, ServesOnlyWhenAPortIsAskedFor) {
  absl::SetFlag(&FLAGS_metrics_port, -1);
  ProcessMetrics off("server");
  ASSERT_TRUE(off.Serve("127.0.0.1").ok());
  EXPECT_FALSE(off.serving());
  EXPECT_EQ(off.url(), "");

  absl::SetFlag(&FLAGS_metrics_port, 0);  // a free port
  ProcessMetrics on("server");
  ASSERT_TRUE(on.Serve("127.0.0.1").ok());
  ASSERT_TRUE(on.serving());
  EXPECT_TRUE(absl::StartsWith(on.url(), "http://127.0.0.1:")) << on.url();
  EXPECT_TRUE(absl::EndsWith(on.url(), "/metrics")) << on.url();
  EXPECT_NE(on.url(), "http://127.0.0.1:0/metrics");
  absl::SetFlag(&FLAGS_metrics_port, -1);
}

TEST(MainPreambleTest, AFailureIsOneLineAndTheBinarysExitCode) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(ReportFailure("asgd_server", absl::InvalidArgumentError("bad"), 2),
            2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "asgd_server: INVALID_ARGUMENT: bad\n");
}

}  // namespace
}  // namespace asgd
