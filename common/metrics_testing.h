// Test support: the value of one metric in a prometheus-cpp registry.
//
//   EXPECT_EQ(MetricValue(registry, "asgd_worker_peer_averages_total",
//                         "result", "ok"), 1);
//
// Thread-safety: as Registry::Collect().
#ifndef ASGD_COMMON_METRICS_TESTING_H_
#define ASGD_COMMON_METRICS_TESTING_H_

#include <string>

#include "prometheus/registry.h"

namespace asgd {

// The counter or gauge `name` whose label `label` is `value` (any series of
// `name` when `label` is empty); -1 when there is none.
inline double MetricValue(prometheus::Registry& registry,
                          const std::string& name, const std::string& label,
                          const std::string& value) {
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) {
      bool match = label.empty();
      for (const auto& l : m.label) {
        if (l.name == label && l.value == value) match = true;
      }
      if (!match) continue;
      return family.type == prometheus::MetricType::Counter ? m.counter.value
                                                            : m.gauge.value;
    }
  }
  return -1;
}

}  // namespace asgd

#endif  // ASGD_COMMON_METRICS_TESTING_H_
