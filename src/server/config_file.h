// Files of secrets that chronoqd reads at start and again on SIGHUP (the
// token file, the webhook secrets file): reading one, splitting its lines,
// and swapping a new version in without a reader ever seeing half of one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chronoq/result.h"

#include "common/mutex.h"

namespace chronoq::server {

// The whole text of the file at `path`; InvalidArgument naming `field`
// ("cannot read <path>") when it cannot be read.
Result<std::string> ReadConfigFile(const std::string& path, std::string_view field);

// Space, tab, CR or LF: what separates the fields of a line.
inline bool IsConfigBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// The fields of one line, split at blanks.
std::vector<std::string_view> ConfigFields(std::string_view line);

// Makes the error of one line: InvalidArgument with the flag's `field`,
// "<source>:<line>: <reason>".
using ConfigLineError = std::function<Status(const std::string& reason)>;
// Calls `visit(fields, number, error)` for each line of `text` (read from
// `source`) that is neither blank nor a `#` comment, in order; returns the
// first error a call returns.
Status ForEachConfigLine(
    std::string_view text, std::string_view source, std::string_view field,
    const std::function<Status(const std::vector<std::string_view>& fields, int number,
                               const ConfigLineError& error)>& visit);

// A value read from a file, and the file, which Reload() reads again.
// Thread-safe: Current() from any thread, Reload() from the signal-waiting
// thread. A caller keeps using the value it got even if a reload replaces
// it meanwhile.
template <typename T>
class Reloadable {
 public:
  // Reads and parses the file at `path`; errors name the line.
  using Loader = Result<T> (*)(const std::string& path);

  // `path` empty: a fixed value, and Reload() answers FailedPrecondition
  // with `fixed_reason`.
  Reloadable(T value, std::string path, Loader load, std::string fixed_reason = "")
      : path_(std::move(path)),
        load_(load),
        fixed_reason_(std::move(fixed_reason)),
        current_(std::make_shared<const T>(std::move(value))) {}
  Reloadable(const Reloadable&) = delete;
  Reloadable& operator=(const Reloadable&) = delete;

  std::shared_ptr<const T> Current() const CHRONOQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return current_;
  }

  // Reads the file again. On success the new value replaces the old one at
  // once and is returned; on an error the old one stays.
  Result<std::shared_ptr<const T>> Reload() CHRONOQ_EXCLUDES(mu_) {
    if (path_.empty()) return Status::FailedPrecondition(fixed_reason_);
    CHRONOQ_ASSIGN_OR_RETURN(T value, load_(path_));
    auto next = std::make_shared<const T>(std::move(value));
    MutexLock lock(mu_);
    current_ = next;
    return next;
  }

  const std::string& path() const { return path_; }

 private:
  const std::string path_;  // empty: not from a file
  const Loader load_;
  const std::string fixed_reason_;
  mutable Mutex mu_;
  std::shared_ptr<const T> current_ CHRONOQ_GUARDED_BY(mu_);
};

}  // namespace chronoq::server
