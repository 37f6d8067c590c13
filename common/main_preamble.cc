#include "common/main_preamble.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/metrics_flags.h"

namespace asgd {

int ReportFailure(absl::string_view program, const absl::Status& status,
                  int exit_code) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()),
               program.data(), status.ToString().c_str());
  return exit_code;
}

ProcessMetrics::ProcessMetrics(const std::string& component)
    : registry_(std::make_shared<prometheus::Registry>()) {
  AddBuildInfo(*registry_, component);
}

absl::Status ProcessMetrics::Serve(const std::string& host) {
  auto endpoint = StartMetricsFromFlags(host, registry_);
  if (!endpoint.ok()) return endpoint.status();
  host_ = host;
  endpoint_ = *std::move(endpoint);
  return absl::OkStatus();
}

std::string ProcessMetrics::url() const {
  if (endpoint_ == nullptr) return "";
  return absl::StrCat("http://", host_, ":", endpoint_->port(), "/metrics");
}

}  // namespace asgd
