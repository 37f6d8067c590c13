// The start that asgd's service binaries (asgd_server, asgd_worker) share,
// after ParseCommandLine (common/cli.h): the one error line of a binary
// that stops, and the process's metrics: a registry holding
// asgd_build_info, served on --metrics_port (common/metrics_flags.h) once
// the binary's own families are in it.
//
//   int Fail(const absl::Status& s) { return ReportFailure("asgd_worker", s); }
//   ...
//   ProcessMetrics process_metrics("worker");
//   WorkerMetrics metrics(process_metrics.registry(), index);
//   if (absl::Status s = process_metrics.Serve(host); !s.ok()) return Fail(s);
//   if (process_metrics.serving()) std::printf("metrics on %s\n", ...url());
//
// (Signals are the server's alone: it blocks SIGINT and SIGTERM before any
// thread starts and waits for them; a worker stops when its run ends.)
//
// Thread-safety: a ProcessMetrics is set up by one thread; its registry is
// thread-safe.
#ifndef ASGD_COMMON_MAIN_PREAMBLE_H_
#define ASGD_COMMON_MAIN_PREAMBLE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/metrics_endpoint.h"
#include "prometheus/registry.h"

namespace asgd {

// Prints "<program>: <status>" on stderr; returns exit_code (the binary's
// exit status).
int ReportFailure(absl::string_view program, const absl::Status& status,
                  int exit_code = 1);

class ProcessMetrics {
 public:
  // A registry with asgd_build_info{component="<component>"}.
  explicit ProcessMetrics(const std::string& component);
  ProcessMetrics(const ProcessMetrics&) = delete;
  ProcessMetrics& operator=(const ProcessMetrics&) = delete;

  // Outlives every family added to it (declare the ProcessMetrics first).
  prometheus::Registry& registry() { return *registry_; }
  // Serves the registry on host:--metrics_port and writes the port to
  // --metrics_port_file; OK and nothing served with --metrics_port=-1.
  // Unavailable when the port cannot be bound. Once.
  absl::Status Serve(const std::string& host);
  bool serving() const { return endpoint_ != nullptr; }
  // http://<host>:<port>/metrics while serving.
  std::string url() const;

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  std::string host_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
};

}  // namespace asgd

#endif  // ASGD_COMMON_MAIN_PREAMBLE_H_
