#include "common/cli.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace asgd {

std::vector<char*> ParseCommandLine(int argc, char** argv, const char* usage) {
  absl::FlagsUsageConfig config;
  config.contains_helpshort_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "_main.cc") || absl::EndsWith(file, "_flags.cc");
  };
  config.contains_help_flags = config.contains_helpshort_flags;
  config.normalize_filename = [](absl::string_view file) {
    return std::string(file);
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  return absl::ParseCommandLine(argc, argv);
}

void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace asgd
