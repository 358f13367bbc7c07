// chronoq import FILE|-: JSON lines, one task per line, into chronoqd.
//
// Design. Each line is already the JSON object POST /v1/tasks takes, so a line
// is never parsed into a document: json::accept() checks that it is JSON
// (0.36 us for a 60-byte line, Release), its first character that it is an
// object, and its text is spliced into the body of POST /v1/tasks/batch as it
// is: {"tasks":[line,line,...],"return":"ids"}. The calling thread reads, checks and packs
// batch k+1 while batch k is in flight on the sending thread (Sender), over
// the one connection; the sender sends k+1 the moment k's answer is in. With
// one connection chronoqd's work on a batch is a serial chain (parse, insert
// and commit, render the answer), so the client packing meanwhile costs no
// throughput.
//
// Only one batch is ever in flight, and chronoqd stores a batch whole or not
// at all, so at any error every batch before the failed one is stored and
// nothing after it: `--skip N` resumes exactly. A bad line is found while its
// batch is packed, before anything of that batch is sent.
//
// A batch ends at --batch lines (at most 10,000, the server's limit) or before
// its body would pass the server's 1 MiB limit on a request body.
#include "cli/import.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <istream>
#include <mutex>
#include <optional>
#include <ostream>
#include <system_error>
#include <thread>
#include <vector>

#include "cli/cli_common.h"
#include <sys/stat.h>

namespace chronoq::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

// chronoqd's limits (server/http_server.h max_body, server/api.h kMaxBatchTasks).
constexpr size_t kMaxBodyBytes = size_t{1} << 20;
constexpr int kMaxBatchTasks = 10'000;
constexpr std::string_view kBodyStart = "{\"tasks\":[";
// Batches ask for their ids alone ("return": "ids"): the import reads no
// more of the answer, and rendering 10,000 tasks costs chronoqd ~1/10 of
// its time on the batch. A chronoqd from before that field refuses it, and
// then gets kBodyEnd.
constexpr std::string_view kBodyEndIds = "],\"return\":\"ids\"}";
constexpr std::string_view kBodyEnd = "]}";

struct ImportArgs {
  std::string file;
  int batch = kMaxBatchTasks;
  int64_t skip = 0;
  std::string on_conflict;
};

// One request's worth of lines.
struct Batch {
  std::string body = std::string(kBodyStart);  // without its end until sent
  std::vector<int64_t> lines;                  // the line number of each task, in order
  uint64_t end_bytes = 0;                      // of the input, through its last line

  bool empty() const { return lines.empty(); }
  // Whether `text` still fits under the body limit.
  bool Fits(size_t text_bytes) const {
    return body.size() + (empty() ? 0 : 1) + text_bytes + kBodyEndIds.size() <= kMaxBodyBytes;
  }
  void Append(std::string_view text, int64_t line) {
    if (!empty()) body += ',';
    body += text;
    lines.push_back(line);
  }
};

constexpr std::string_view kSpace = " \t\r\n";  // JSON's whitespace

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(kSpace) == std::string_view::npos;
}

// Why `line` cannot be a task, or "" when it is a JSON object.
std::string CheckLine(std::string_view line) {
  if (!json::accept(line)) {
    // Only on the error path: parse again for the position.
    const Result<json> parsed = ParseJson(std::string(line), "line");
    std::string why = parsed.ok() ? "" : parsed.status().message();
    // "line: not valid JSON (at line 1, column 7)" -> "not valid JSON (at column 7)".
    if (const size_t at = why.find("line: "); at == 0) why.erase(0, 6);
    if (const size_t at = why.find("at line 1, "); at != std::string::npos) why.erase(at + 3, 8);
    return why.empty() ? "not valid JSON" : why;
  }
  const size_t first = line.find_first_not_of(kSpace);
  if (line[first] != '{') return "not a JSON object (a task is {\"queue\": ..., ...})";
  return "";
}

// The line with "on_conflict": `mode` added, unless it says its own.
std::string WithOnConflict(std::string_view line, const std::string& mode) {
  // The cheap test first: a line without the word cannot have the field.
  if (line.find("\"on_conflict\"") != std::string_view::npos &&
      json::parse(line).contains("on_conflict")) {
    return std::string(line);
  }
  const size_t brace = line.find('{');
  const size_t next = line.find_first_not_of(kSpace, brace + 1);
  const bool empty_object = next != std::string_view::npos && line[next] == '}';
  std::string out = "{\"on_conflict\":\"" + mode + "\"";
  if (!empty_object) out += ',';
  out.append(line.substr(brace + 1));
  return out;
}

// "tasks[12].priority" -> 12, or nullopt.
std::optional<size_t> TaskIndexOf(std::string_view field) {
  if (!field.starts_with("tasks[")) return std::nullopt;
  size_t i = 0;
  const char* begin = field.data() + 6;
  const char* end = field.data() + field.size();
  const auto [stop, ec] = std::from_chars(begin, end, i);
  if (ec != std::errc() || stop == end || *stop != ']') return std::nullopt;
  return i;
}

// The server's `message` about task `task` ("tasks[12]") without the task:
// "tasks[12].priority: must be an integer" -> "priority: must be an integer".
std::string WithoutTask(std::string message, std::string_view task) {
  for (size_t at; (at = message.find(task)) != std::string::npos;) {
    size_t length = task.size();
    if (message.compare(at + length, 1, ".") == 0) {
      length += 1;
    } else if (at == 0 && message.compare(length, 2, ": ") == 0) {
      length += 2;
    }
    message.erase(at, length);
  }
  return message;
}

// "line 7", "lines 7-12".
std::string LineRange(int64_t first, int64_t last) {
  if (first == last) return "line " + std::to_string(first);
  return "lines " + std::to_string(first) + "-" + std::to_string(last);
}

// "1 task", "1,000 tasks".
std::string Tasks(int64_t n) { return ShowCount(n) + (n == 1 ? " task" : " tasks"); }

// Counts and the clock of one import.
struct Progress {
  SteadyClock::time_point start = SteadyClock::now();
  int64_t lines_read = 0;  // every line, skipped and blank ones too
  int64_t skipped = 0;     // --skip
  int64_t blank = 0;
  int64_t stored = 0;  // tasks in batches the server took
  int64_t batches = 0;
  int64_t stored_through = 0;  // the last line of the last stored batch
  uint64_t bytes_read = 0;
  uint64_t bytes_stored = 0;            // through the last line of the last stored batch
  std::optional<uint64_t> total_bytes;  // of a regular file
  bool drawn = false;                   // a progress line is on the terminal

  double Seconds() const {
    return std::chrono::duration<double>(SteadyClock::now() - start).count();
  }
  double Rate() const {
    const double s = Seconds();
    return s > 0 ? static_cast<double>(stored) / s : 0;
  }
};

// Posts batches on a thread of its own, one at a time and in order, and
// stops at the first one not stored. The next batch waits packed in a slot,
// so the thread sends it as soon as the previous answer is in, with no
// hand-over between threads on that path: on a busy machine each wake-up of
// another thread can wait for a time slice, and there are a hundred batches
// in a million tasks. Thread-safe; Close() before reading failed().
class Sender {
 public:
  // What the batches stored so far hold.
  struct Stored {
    int64_t tasks = 0;
    int64_t batches = 0;
    int64_t through = 0;  // the last line of the last stored batch
    uint64_t bytes = 0;   // of the input, through that line
  };
  // The batch that was not stored, and the answer (or the error) it got.
  struct Failed {
    std::vector<int64_t> lines;
    Result<HttpResponse> answer;
  };

  // `session` is used by the sending thread alone until Close() returns.
  explicit Sender(Session& session) : s_(session), thread_([this] { Run(); }) {}
  ~Sender() { Close(); }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Waits until the batch queued before has gone out, then queues `batch`.
  // False, without queueing, once a batch has failed.
  bool Queue(Batch batch) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !next_ || failed_; });
    if (failed_) return false;
    next_ = std::move(batch);
    cv_.notify_all();
    return true;
  }

  // Returns once every queued batch is answered, or one failed (then the
  // ones queued after it are never sent).
  void Close() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  Stored stored() const {
    std::lock_guard lock(mu_);
    return stored_;
  }
  const std::optional<Failed>& failed() const { return failed_; }

 private:
  void Run() {
    while (true) {
      Batch batch;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return next_ || closing_; });
        if (!next_) return;
        batch = std::move(*next_);
        next_.reset();
      }
      cv_.notify_all();  // room for the next batch
      const size_t open_size = batch.body.size();
      batch.body += ids_only_ ? kBodyEndIds : kBodyEnd;
      Result<HttpResponse> r = s_.SendText("POST", "/v1/tasks/batch", batch.body);
      if (ids_only_ && RefusesReturn(r)) {
        // An older chronoqd: it stored nothing of the batch. This one and
        // every one after it go without "return".
        ids_only_ = false;
        batch.body.resize(open_size);
        batch.body += kBodyEnd;
        r = s_.SendText("POST", "/v1/tasks/batch", batch.body);
      }
      std::lock_guard lock(mu_);
      if (r.ok() && r->status >= 200 && r->status <= 299) {
        stored_.tasks += static_cast<int64_t>(batch.lines.size());
        stored_.batches += 1;
        stored_.through = batch.lines.back();
        stored_.bytes = batch.end_bytes;
        continue;
      }
      failed_.emplace(Failed{std::move(batch.lines), std::move(r)});
      next_.reset();
      cv_.notify_all();
      return;
    }
  }

  // A 400 naming the field "return": chronoqd does not know it.
  static bool RefusesReturn(const Result<HttpResponse>& r) {
    if (!r.ok() || r->status != 400) return false;
    const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) return false;
    const auto error = body.find("error");
    if (error == body.end() || !error->is_object()) return false;
    const auto field = error->find("field");
    return field != error->end() && *field == "return";
  }

  Session& s_;
  bool ids_only_ = true;  // the sending thread's alone
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_ (failed_ is written once, under mu_, and read after the join):
  std::optional<Batch> next_;
  bool closing_ = false;
  Stored stored_;
  std::optional<Failed> failed_;
  std::thread thread_;  // last: it starts running in the constructor
};

class Importer {
 public:
  Importer(Session& s, const ImportArgs& a, bool on_conflict_given)
      : io_(s.io()),
        json_output_(s.json_output()),
        a_(a),
        on_conflict_given_(on_conflict_given),
        sender_(s) {}

  int Run(std::istream& in, std::optional<uint64_t> total_bytes) {
    p_.total_bytes = total_bytes;
    Batch batch;
    std::string line;
    while (std::getline(in, line)) {
      const int64_t n = ++p_.lines_read;
      p_.bytes_read += line.size() + 1;
      if (n <= a_.skip) {
        ++p_.skipped;
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (IsBlank(line)) {
        ++p_.blank;
        continue;
      }
      if (const std::string why = CheckLine(line); !why.empty()) {
        return LineRefused(batch, n, why);
      }
      if (line.find("\"on_conflict\"") != std::string::npos) conflict_modes_ = true;
      const std::string with = on_conflict_given_ ? WithOnConflict(line, a_.on_conflict) : "";
      const std::string_view text = on_conflict_given_ ? std::string_view(with) : line;
      if (!batch.Fits(text.size())) {
        if (batch.empty()) {
          return LineRefused(batch, n,
                             "longer than chronoqd's 1 MiB request limit (" +
                                 ShowCount(static_cast<int64_t>(text.size())) + " bytes)");
        }
        if (!Queue(std::move(batch))) return Failure();
        batch = Batch();
      }
      batch.Append(text, n);
      batch.end_bytes = p_.bytes_read;
      if (static_cast<int>(batch.lines.size()) >= a_.batch) {
        if (!Queue(std::move(batch))) return Failure();
        batch = Batch();
      }
    }
    if (in.bad()) {
      const int64_t first = batch.empty() ? p_.lines_read + 1 : batch.lines.front();
      if (const int code = Drain(); code != kExitOk) return code;
      io_.err << "error: cannot read " << a_.file << " after line " << p_.lines_read << "\n";
      Where(first, "nothing from line " + std::to_string(first) + " on (its batch was not sent)",
            "");
      return kExitServerError;
    }
    if (!batch.empty() && !Queue(std::move(batch))) return Failure();
    if (const int code = Drain(); code != kExitOk) return code;
    Summary();
    return kExitOk;
  }

 private:
  // Hands `batch` to the sender; false when an earlier batch failed.
  bool Queue(Batch batch) {
    const bool queued = sender_.Queue(std::move(batch));
    TakeStored();
    DrawProgress();
    return queued;
  }

  // Waits for every batch handed over; reports a failed one.
  int Drain() {
    sender_.Close();
    TakeStored();
    ClearProgress();
    return sender_.failed() ? Failure() : kExitOk;
  }

  void TakeStored() {
    const Sender::Stored stored = sender_.stored();
    p_.stored = stored.tasks;
    p_.batches = stored.batches;
    p_.stored_through = stored.through;
    p_.bytes_stored = stored.bytes;
  }

  // Reports the batch that was not stored; returns the exit code.
  int Failure() {
    sender_.Close();
    TakeStored();
    ClearProgress();
    const Sender::Failed& failed = *sender_.failed();
    const std::vector<int64_t>& lines = failed.lines;
    const int64_t first = lines.front();
    const int64_t last = lines.back();
    if (!failed.answer.ok()) {
      const Status& why = failed.answer.status();
      io_.err << "error: sending " << LineRange(first, last) << ": " << why.message() << "\n";
      Where(first,
            "no answer came for " + LineRange(first, last) + ": they may or may not be stored", "");
      io_.err << "(a task with an id is not stored twice with --on-conflict ignore; one without "
                 "may be)\n";
      return why.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitUnreachable;
    }
    const Reply reply{.status = failed.answer->status, .raw = failed.answer->body};
    const json error = ErrorOf(reply.raw);
    const std::string field =
        Member(error, "field").is_string() ? error["field"].get<std::string>() : std::string();
    const std::optional<size_t> index = TaskIndexOf(field);
    std::string fix = "once the input is fixed";
    if (index && *index < lines.size()) {
      fix = "once line " + std::to_string(lines[*index]) + " is fixed";
      // "tasks[12].priority" names the line instead of the batch's index.
      const std::string task = field.substr(0, field.find(']') + 1);
      const std::string rest = WithoutTask(field, task);
      io_.err << "error: line " << lines[*index] << ": " << Show(error, "code") << ": "
              << WithoutTask(Show(error, "message"), task)
              << (rest.empty() ? "" : " (field " + rest + ")") << "\n";
    } else {
      io_.err << "error: chronoqd refused " << LineRange(first, last) << ": "
              << DescribeError(reply) << "\n";
    }
    Where(first,
          "nothing from line " + std::to_string(first) + " on (chronoqd refused its batch, " +
              LineRange(first, last) + ", as a whole)",
          fix);
    return kExitServerError;
  }

  // A line chronoq itself refuses: `batch` (not sent) holds the lines before it.
  int LineRefused(const Batch& batch, int64_t line, const std::string& why) {
    // A batch sent before may yet fail: that is the first error, then.
    if (const int code = Drain(); code != kExitOk) return code;
    io_.err << "error: line " << line << ": " << why << "\n";
    const int64_t first = batch.empty() ? line : batch.lines.front();
    Where(first, "nothing from line " + std::to_string(first) + " on (its batch was not sent)",
          "once line " + std::to_string(line) + " is fixed");
    return kExitServerError;
  }

  // Says what is stored, what is not (`rest`), and how to go on from
  // `first_not_stored` (`when`: "once line 12 is fixed").
  void Where(int64_t first_not_stored, const std::string& rest, const std::string& when) {
    io_.err << "stored: ";
    if (p_.stored > 0) {
      io_.err << LineRange(a_.skip + 1, p_.stored_through) << " (" << Tasks(p_.stored) << " in "
              << p_.batches << (p_.batches == 1 ? " batch" : " batches") << ")";
    } else {
      io_.err << "nothing";
    }
    io_.err << "; " << rest << "\n";
    io_.err << "to go on" << (when.empty() ? "" : " " + when) << ": chronoq import " << a_.file;
    if (first_not_stored > 1) io_.err << " --skip " << first_not_stored - 1;
    io_.err << "\n";
    if (json_output_) io_.out << SummaryJson(first_not_stored - 1).dump() << "\n";
  }

  // Whether every task was sent under on_conflict reject, so that a stored
  // batch means every task of it was created.
  bool AllCreated() const {
    return !conflict_modes_ && (!on_conflict_given_ || a_.on_conflict == "reject");
  }

  json SummaryJson(std::optional<int64_t> resume_skip) const {
    json j = {{"lines_read", p_.lines_read},
              {"skipped", p_.skipped},
              {"blank", p_.blank},
              {"tasks", p_.stored},
              {"created", AllCreated() ? json(p_.stored) : json()},
              {"batches", p_.batches},
              {"seconds", p_.Seconds()},
              {"per_s", std::llround(p_.Rate())}};
    if (resume_skip) j["resume_skip"] = *resume_skip;
    return j;
  }

  void Summary() {
    if (json_output_) {
      io_.out << SummaryJson(std::nullopt).dump() << "\n";
      return;
    }
    io_.out << (AllCreated() ? "created " : "stored ") << Tasks(p_.stored) << " from "
            << ShowCount(p_.lines_read) << (p_.lines_read == 1 ? " line" : " lines");
    if (p_.skipped > 0 || p_.blank > 0) {
      io_.out << " (";
      if (p_.skipped > 0) io_.out << "first " << ShowCount(p_.skipped) << " skipped";
      if (p_.skipped > 0 && p_.blank > 0) io_.out << ", ";
      if (p_.blank > 0) io_.out << ShowCount(p_.blank) << " blank";
      io_.out << ")";
    }
    io_.out << " in " << ShowSeconds(p_.Seconds()) << ": " << ShowCount(std::llround(p_.Rate()))
            << " tasks/s\n";
    if (!AllCreated()) {
      // POST /v1/tasks answers 200 for a task that was already there, but the
      // batch answers 201 for all and lists each task as stored.
      io_.out << "created or already there (on_conflict ignore or replace): the batch answer "
                 "does not tell which\n";
    }
  }

  void DrawProgress() {
    if (!io_.err_is_terminal) return;
    io_.err << "\r\x1b[K" << ProgressLine(p_.stored, p_.Seconds(), p_.bytes_stored, p_.total_bytes)
            << std::flush;
    p_.drawn = true;
  }
  void ClearProgress() {
    if (!p_.drawn) return;
    io_.err << "\r\x1b[K" << std::flush;
    p_.drawn = false;
  }

  const CliIo& io_;
  const bool json_output_;
  const ImportArgs& a_;
  const bool on_conflict_given_;
  Progress p_;
  bool conflict_modes_ = false;  // some line says its own on_conflict
  Sender sender_;                // last: its thread starts in the constructor
};

}  // namespace

std::string ProgressLine(int64_t stored, double seconds, uint64_t done_bytes,
                         std::optional<uint64_t> total_bytes) {
  const double rate = seconds > 0 ? static_cast<double>(stored) / seconds : 0;
  const std::string counts = ShowCount(stored) + " tasks  " + ShowCount(std::llround(rate)) + "/s";
  if (!total_bytes || *total_bytes == 0) return counts;
  const double done =
      std::min(1.0, static_cast<double>(done_bytes) / static_cast<double>(*total_bytes));
  std::string line = ProgressBar(done) + "  " + counts;
  // The rest takes as long as the done part did, in proportion.
  if (done > 0 && done < 1) line += "  ETA " + ShowSeconds(seconds * (1 - done) / done);
  return line;
}

void AddImportCommand(CommandTable& table) {
  ImportArgs& a = table.Own<ImportArgs>();
  CLI::App* cmd = table.app().add_subcommand(
      "import", "Enqueue tasks from JSON lines (one POST /v1/tasks body per line) in batches");
  cmd->add_option("file", a.file, "The file, or - for stdin")->type_name("FILE|-")->required();
  cmd->add_option("--batch", a.batch, "Tasks per request (1-10000; fewer when 1 MiB is reached)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--skip", a.skip, "Skip the first N lines (to resume an import)")->type_name("N");
  CLI::Option* on_conflict =
      cmd->add_option("--on-conflict", a.on_conflict,
                      "For lines that do not say their own: when an id names an unfinished task")
          ->check(CLI::IsMember({"reject", "ignore", "replace"}));
  table.Add(cmd, [&a, on_conflict](Session& s) {
    const CliIo& io = s.io();
    if (a.batch < 1 || a.batch > kMaxBatchTasks) {
      return Usage(io, Status::InvalidArgument("--batch", "must be 1-10000"));
    }
    if (a.skip < 0) return Usage(io, Status::InvalidArgument("--skip", "must not be negative"));
    Importer importer(s, a, Given(on_conflict));
    if (a.file == "-") return importer.Run(io.in, std::nullopt);
    std::ifstream file(a.file, std::ios::binary);
    if (!file) {
      return Usage(io,
                   Status::InvalidArgument(
                       "import", "cannot read " + a.file + ": " +
                                     std::error_code(errno, std::generic_category()).message()));
    }
    struct stat st {};
    std::optional<uint64_t> size;
    if (stat(a.file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      size = static_cast<uint64_t>(st.st_size);
    }
    return importer.Run(file, size);
  });
}

}  // namespace chronoq::cli
