#include "common/metrics_endpoint.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace asgd {
namespace {

constexpr int kListenBacklog = 128;

// A listening TCP socket on host:port; the fd, or an error naming the
// address.
absl::StatusOr<int> Listen(const std::string& host, int port) {
  const std::string address = absl::StrCat(host, ":", port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad metrics port ", port, " (want 0 to 65535)"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  const int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                              service.c_str(), &hints, &found);
  if (gai != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", gai_strerror(gai)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        listen(fd, kListenBacklog) == 0) {
      break;
    }
    error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", error));
  }
  return fd;
}

int LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return 0;
}

MHD_Result Reply(MHD_Connection* connection, unsigned int code,
                 const std::string& body, const char* content_type) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  const MHD_Result queued = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return queued;
}

// libmicrohttpd's request callback (on its server thread): called once the
// request's headers have arrived.
MHD_Result HandleRequest(void* cls, MHD_Connection* connection,
                         const char* url, const char* method,
                         const char* /*version*/, const char* /*upload_data*/,
                         size_t* /*upload_data_size*/, void** /*req_cls*/) {
  const auto* registry = static_cast<const prometheus::Registry*>(cls);
  constexpr char kText[] = "text/plain; charset=utf-8";
  if (std::strcmp(url, "/metrics") != 0) {
    return Reply(connection, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n",
                 kText);
  }
  if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                 "method not allowed: /metrics is read-only\n", kText);
  }
  return Reply(
      connection, MHD_HTTP_OK,
      SerializeMetrics(*registry) + SerializeProcessStats(ReadProcessStats()),
      kMetricsContentType);
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {}

MetricsEndpoint::~MetricsEndpoint() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // also closes the socket
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port,
    std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("MetricsEndpoint needs a registry");
  }
  const absl::StatusOr<int> fd = Listen(host, port);
  if (!fd.ok()) return fd.status();
  auto endpoint =
      std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(registry)));
  endpoint->port_ = LocalPort(*fd);
  endpoint->daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD, 0, nullptr, nullptr, &HandleRequest,
      endpoint->registry_.get(), MHD_OPTION_LISTEN_SOCKET, *fd,
      MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>(kMetricsIdleTimeoutS),
      MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned int>(kMetricsMaxConnections),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      static_cast<unsigned int>(kMetricsConnectionsPerAddress),
      MHD_OPTION_END);
  if (endpoint->daemon_ == nullptr) {
    // Not closed here: libmicrohttpd may already have closed the socket it
    // was given, and closing twice could close an fd opened meanwhile.
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", host, ":", port,
        ": libmicrohttpd did not start (no epoll, or out of threads or fds)"));
  }
  if (endpoint->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("no metrics port on ", host, ":", port));
  }
  return endpoint;
}

std::string SerializeMetrics(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

std::string SerializeProcessStats(const ProcessStats& stats) {
  const struct {
    const char* name;
    const char* help;
    int64_t value;
  } gauges[] = {
      {"asgd_process_resident_bytes", "Resident memory (VmRSS).",
       stats.resident_bytes},
      {"asgd_process_heap_in_use_bytes",
       "Bytes malloc has handed out and not had back.",
       stats.heap_in_use_bytes},
      {"asgd_process_heap_free_bytes",
       "Bytes freed inside malloc's arenas, kept for reuse (resident until "
       "trimmed).",
       stats.heap_free_bytes},
      {"asgd_process_threads", "Threads of the process.", stats.threads},
      {"asgd_process_open_fds", "Open file descriptors.", stats.open_fds},
  };
  std::vector<prometheus::MetricFamily> families;
  for (const auto& g : gauges) {
    if (g.value < 0) continue;
    prometheus::MetricFamily family;
    family.name = g.name;
    family.help = g.help;
    family.type = prometheus::MetricType::Gauge;
    family.metric.emplace_back();
    family.metric.back().gauge.value = static_cast<double>(g.value);
    families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

void AddBuildInfo(prometheus::Registry& registry, const std::string& component) {
  prometheus::BuildGauge()
      .Name("asgd_build_info")
      .Help("What is running: always 1, with component and version labels.")
      .Register(registry)
      .Add({{"component", component}, {"version", kAsgdVersion}})
      .Set(1);
}

}  // namespace asgd
