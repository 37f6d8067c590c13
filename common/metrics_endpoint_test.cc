// MetricsEndpoint over real loopback TCP (port 0): the page and its
// Content-Type, other paths and methods, and scrapes that still answer
// within 2 s while many idle and half-sent connections are held open. The
// 2 s is a bound a user would notice (the docs promise it), not a benchmark:
// the scrape costs milliseconds, the old thread-per-connection server took
// 9.5 s with 40 idle connections.
#include "common/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace asgd {
namespace {

constexpr double kScrapeBoundS = 2.0;

// A TCP connection to 127.0.0.1:port from `source` (another loopback address
// counts as another client), every read and write bounded by `timeout_s`;
// -1 on failure.
int Connect(int port, double timeout_s, const char* source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout_s),
             static_cast<suseconds_t>((timeout_s - static_cast<int>(timeout_s)) *
                                      1e6)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  return send(fd, data.data(), data.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(data.size());
}

struct HttpReply {
  std::string head;  // status line and headers
  std::string body;
  double seconds = 0;  // from connect to the end of the reply
};

// One request on a new connection (Connection: close); an empty head when
// there was no complete reply within `timeout_s` per read.
HttpReply Http(int port, const std::string& method, const std::string& path,
               const char* source = "127.0.0.1", double timeout_s = 10) {
  HttpReply reply;
  const absl::Time start = absl::Now();
  const int fd = Connect(port, timeout_s, source);
  if (fd < 0) return reply;
  std::string response;
  if (SendAll(fd, absl::StrCat(method, " ", path,
                               " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Connection: close\r\n\r\n"))) {
    char buf[65536];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        if (n < 0) response.clear();  // timed out or reset
        break;
      }
      response.append(buf, n);
    }
  }
  close(fd);
  reply.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const size_t end = response.find("\r\n\r\n");
  if (end == std::string::npos) return reply;
  reply.head = response.substr(0, end);
  reply.body = response.substr(end + 4);
  return reply;
}

std::string HeaderValue(const std::string& head, const std::string& name) {
  for (size_t pos = 0; pos < head.size();) {
    size_t eol = head.find("\r\n", pos);
    if (eol == std::string::npos) eol = head.size();
    const std::string line = head.substr(pos, eol - pos);
    if (line.size() > name.size() + 1 &&
        absl::StartsWithIgnoreCase(line, name + ":")) {
      size_t v = name.size() + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      return line.substr(v);
    }
    pos = eol + 2;
  }
  return "";
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    AddBuildInfo(*registry_, "test");
    prometheus::BuildCounter()
        .Name("asgd_test_events_total")
        .Help("Events seen by the test.")
        .Register(*registry_)
        .Add({{"kind", "a"}})
        .Increment(3);
    auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, registry_);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = *std::move(endpoint);
    ASSERT_GT(endpoint_->port(), 0);
  }

  void TearDown() override {
    for (int fd : held_) close(fd);
  }

  // Opens `idle` connections that send nothing and `half` that send half a
  // request, and keeps them open until the test ends.
  void Hold(int idle, int half, const char* source = "127.0.0.1") {
    for (int i = 0; i < idle + half; ++i) {
      const int fd = Connect(endpoint_->port(), 10, source);
      ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
      held_.push_back(fd);
      if (i >= idle) {
        ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
      }
    }
  }

  bool IsAPage(const HttpReply& r) const {
    return absl::StartsWith(r.head, "HTTP/1.1 200") &&
           absl::StrContains(r.body, "asgd_build_info{") &&
           absl::StrContains(r.body, "asgd_test_events_total{kind=\"a\"} 3");
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::vector<int> held_;
};

TEST_F(MetricsEndpointTest, ServesTheRegistryInTheTextFormat) {
  const HttpReply r = Http(endpoint_->port(), "GET", "/metrics");
  ASSERT_TRUE(IsAPage(r)) << r.head << "\n" << r.body;
  EXPECT_EQ(HeaderValue(r.head, "Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  // The registry's metrics, then the process's own gauges (read at the
  // scrape, so only their names are known here).
  EXPECT_TRUE(absl::StartsWith(r.body, SerializeMetrics(*registry_)));
  for (const char* name :
       {"asgd_process_resident_bytes", "asgd_process_heap_in_use_bytes",
        "asgd_process_heap_free_bytes", "asgd_process_threads",
        "asgd_process_open_fds"}) {
    EXPECT_TRUE(
        absl::StrContains(r.body.substr(SerializeMetrics(*registry_).size()),
                          absl::StrCat("# TYPE ", name, " gauge\n", name, " ")))
        << name;
  }
  EXPECT_TRUE(absl::StrContains(
      r.body, "# TYPE asgd_test_events_total counter\n"));
  // A metric added later is on the next page.
  prometheus::BuildCounter()
      .Name("asgd_test_later_total")
      .Help("Added after the start.")
      .Register(*registry_)
      .Add({})
      .Increment();
  EXPECT_TRUE(absl::StrContains(Http(endpoint_->port(), "GET", "/metrics").body,
                                "asgd_test_later_total 1"));
  const HttpReply head = Http(endpoint_->port(), "HEAD", "/metrics");
  EXPECT_TRUE(absl::StartsWith(head.head, "HTTP/1.1 200")) << head.head;
  EXPECT_TRUE(head.body.empty());
}

TEST(SerializeProcessStatsTest, WritesTheKnownFiguresAsGauges) {
  ProcessStats stats;
  stats.resident_bytes = 1048576;
  stats.heap_in_use_bytes = 4096;
  stats.threads = 7;  // heap free and open files unknown (-1): left out
  EXPECT_EQ(SerializeProcessStats(stats),
            "# HELP asgd_process_resident_bytes Resident memory (VmRSS).\n"
            "# TYPE asgd_process_resident_bytes gauge\n"
            "asgd_process_resident_bytes 1048576\n"
            "# HELP asgd_process_heap_in_use_bytes Bytes malloc has handed "
            "out and not had back.\n"
            "# TYPE asgd_process_heap_in_use_bytes gauge\n"
            "asgd_process_heap_in_use_bytes 4096\n"
            "# HELP asgd_process_threads Threads of the process.\n"
            "# TYPE asgd_process_threads gauge\n"
            "asgd_process_threads 7\n");
  EXPECT_EQ(SerializeProcessStats(ProcessStats{}), "");
}

TEST_F(MetricsEndpointTest, OtherPathsAndMethodsAreRefused) {
  EXPECT_TRUE(absl::StartsWith(Http(endpoint_->port(), "GET", "/").head,
                               "HTTP/1.1 404"));
  EXPECT_TRUE(absl::StartsWith(
      Http(endpoint_->port(), "GET", "/metrics/x").head, "HTTP/1.1 404"));
  const HttpReply post = Http(endpoint_->port(), "POST", "/metrics");
  EXPECT_TRUE(absl::StartsWith(post.head, "HTTP/1.1 405")) << post.head;
  EXPECT_EQ(HeaderValue(post.head, "Allow"), "GET, HEAD");
}

TEST_F(MetricsEndpointTest, IdleAndHalfSentConnectionsDoNotDelayAScrape) {
  int idle_held = 0;
  for (const auto& [idle, half] : {std::pair{40, 0}, std::pair{64, 8}}) {
    Hold(idle - idle_held, half);
    idle_held = idle;
    const HttpReply r = Http(endpoint_->port(), "GET", "/metrics");
    std::printf("scrape with %zu connections held open (%d half-sent): %.3f s\n",
                held_.size(), half, r.seconds);
    EXPECT_TRUE(IsAPage(r)) << r.head;
    EXPECT_LT(r.seconds, kScrapeBoundS);
  }
}

TEST_F(MetricsEndpointTest, OneAddressCannotTakeEveryConnection) {
  // Twice the per-address share from one address: the connections past it
  // are closed at once by the server, and a client at another address
  // scrapes as usual.
  Hold(2 * kMetricsConnectionsPerAddress - 8, 8);
  char byte;
  const ssize_t last = recv(held_.back(), &byte, 1, 0);  // 10 s timeout
  EXPECT_TRUE(last == 0 || (last < 0 && errno == ECONNRESET))
      << "the last connection was not closed: " << last << " "
      << std::strerror(errno);
  const HttpReply other =
      Http(endpoint_->port(), "GET", "/metrics", "127.0.0.2");
  std::printf("scrape from another address with %zu connections held: %.3f s\n",
              held_.size(), other.seconds);
  EXPECT_TRUE(IsAPage(other)) << other.head;
  EXPECT_LT(other.seconds, kScrapeBoundS);
}

TEST(MetricsEndpointStartTest, ReportsBadAddressesAndFreesThePort) {
  auto registry = std::make_shared<prometheus::Registry>();
  EXPECT_EQ(MetricsEndpoint::Start("no-such-host.invalid", 0, registry)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1", 70000, registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  // The port is taken while it serves...
  auto second = MetricsEndpoint::Start("127.0.0.1", port, registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(),
                                absl::StrCat("127.0.0.1:", port)))
      << second.status();
  // ...and free once it is destroyed.
  first->reset();
  const int fd = Connect(port, 5);
  EXPECT_LT(fd, 0) << "something still listens on " << port;
  if (fd >= 0) close(fd);
  auto again = MetricsEndpoint::Start("127.0.0.1", port, registry);
  EXPECT_TRUE(again.ok()) << again.status();
}

}  // namespace
}  // namespace asgd
