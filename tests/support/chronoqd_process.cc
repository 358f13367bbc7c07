#include "support/chronoqd_process.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

#include <signal.h>
#include <unistd.h>

namespace chronoq::test {

Status ChronoqdProcess::Start() {
  if (process_.running()) return Status::FailedPrecondition("chronoqd is already running");
  port_ = 0;
  if (access(options_.binary.c_str(), X_OK) != 0) {
    return Status::NotFound("cannot run chronoqd at " + options_.binary +
                            " (build the chronoqd target or give its path)");
  }
  SpawnOptions o;
  o.argv = options_.wrapper;
  o.search_path = !options_.wrapper.empty();
  o.argv.insert(o.argv.end(),
                {options_.binary, "--listen", "127.0.0.1:0", "--data", options_.data_dir});
  o.argv.insert(o.argv.end(), options_.args.begin(), options_.args.end());
  o.env = options_.env;
  o.stdin_mode = Stdio::kNull;
  o.stdout_mode = Stdio::kPipe;
  if (!options_.log.empty()) {
    o.stderr_mode = Stdio::kFile;
    o.stderr_file = options_.log;
  }
  CHRONOQ_ASSIGN_OR_RETURN(process_, Subprocess::Spawn(o));
  // The first stdout line: "chronoqd listening on http://127.0.0.1:PORT (data in ...)",
  // https:// with --tls-cert.
  Result<std::string> line =
      process_.ReadLine(Deadline(options_.start_timeout), "chronoqd's \"listening on\" line");
  for (const std::string_view scheme : {"http", "https"}) {
    const std::string marker = " " + std::string(scheme) + "://127.0.0.1:";
    const size_t at = line.ok() ? line->find(marker) : std::string::npos;
    if (at == std::string::npos) continue;
    port_ = std::atoi(line->c_str() + at + marker.size());
    scheme_ = scheme;
  }
  if (port_ > 0) return {};
  const std::string why = line.ok() ? "chronoqd printed \"" + *line + "\" instead of its port"
                                    : line.status().message();
  const int code = process_.Kill();
  return Status::Unavailable(
      WithLog(why + "; chronoqd " + Subprocess::DescribeExit(code) + " (" + options_.binary + ")"));
}

Result<int> ChronoqdProcess::Stop(int sig) {
  if (!process_.running()) return Status::FailedPrecondition("chronoqd is not running");
  process_.Signal(sig);
  Result<int> code = process_.Wait(Deadline(options_.stop_timeout));
  if (code.ok()) return code;
  process_.Kill();
  return Status(
      StatusCode::kDeadlineExceeded,
      WithLog("chronoqd did not exit within " + std::to_string(options_.stop_timeout.count()) +
              " s of signal " + std::to_string(sig) + " (" + sigabbrev_np(sig) + "); killed it"));
}

std::string ChronoqdProcess::LogTail(size_t max) const {
  if (options_.log.empty()) return "";
  std::ifstream in(options_.log, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  const size_t from = size > max ? size - max : 0;
  in.seekg(static_cast<std::streamoff>(from));
  std::string text(size - from, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

std::string ChronoqdProcess::WithLog(const std::string& message) const {
  if (options_.log.empty()) return message;
  return message + "; the end of " + options_.log + ":\n" + LogTail();
}

}  // namespace chronoq::test
