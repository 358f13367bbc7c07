// The server commands: health and version.
#include <ostream>

#include "cli/cli_common.h"

#ifndef CHRONOQ_VERSION
#define CHRONOQ_VERSION "unknown"
#endif

namespace chronoq::cli {

void AddServerCommands(CommandTable& table) {
  {
    CLI::App* cmd = table.app().add_subcommand("health", "Check that the server is up");
    table.Add(cmd, [](Session& s) {
      return s.Simple("GET", "/healthz", nullptr,
                      [&](const Reply& r) { s.io().out << Show(r.body, "status") << "\n"; });
    });
  }
  {
    CLI::App* cmd = table.app().add_subcommand("version", "Show the client and server versions");
    table.Add(cmd, [](Session& s) {
      if (!s.json_output()) s.io().out << "client " << CHRONOQ_VERSION << "\n";
      return s.Simple("GET", "/v1/version", nullptr, [&](const Reply& r) {
        s.io().out << "server " << Show(r.body, "version") << "\n";
      });
    });
  }
}

}  // namespace chronoq::cli
