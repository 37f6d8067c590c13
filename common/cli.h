// Command-line setup shared by asgd binaries: --help lists the flags defined
// in the binary's *_main.cc and in shared *_flags.cc files.
#ifndef ASGD_COMMON_CLI_H_
#define ASGD_COMMON_CLI_H_

#include <string>
#include <vector>

namespace asgd {

// Sets the usage message, makes --help/--helpshort show the flags of
// *_main.cc files, and parses the command line. Returns the positional
// arguments (argv[0] first).
std::vector<char*> ParseCommandLine(int argc, char** argv, const char* usage);

// Writes `port` and a newline to `path` atomically (temporary file, rename),
// for scripts that wait for a server to be up. Does nothing if path is empty.
void WritePortFile(const std::string& path, int port);

}  // namespace asgd

#endif  // ASGD_COMMON_CLI_H_
