#include "common/metrics_endpoint.h"

#include <exception>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"

namespace asgd {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port,
    std::shared_ptr<prometheus::Registry> registry) {
  auto endpoint = std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint());
  const std::string address = absl::StrCat(host, ":", port);
  try {  // prometheus-cpp reports bind errors as exceptions
    endpoint->exposer_ =
        std::make_unique<prometheus::Exposer>(std::vector<std::string>{
            "listening_ports", address, "num_threads",
            absl::StrCat(kMetricsThreads), "request_timeout_ms",
            absl::StrCat(kMetricsRequestTimeoutMs), "linger_timeout_ms", "0"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", e.what()));
  }
  endpoint->exposer_->RegisterCollectable(registry);
  const auto ports = endpoint->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("no metrics port on ", address));
  }
  endpoint->port_ = ports[0];
  return endpoint;
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
