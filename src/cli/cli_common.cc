#include "cli/cli_common.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <system_error>

#include "chronoq/time.h"

#ifndef CHRONOQ_VERSION
#define CHRONOQ_VERSION "unknown"
#endif

namespace chronoq::cli {

// ---------------------------------------------------------------------------
// Local validation.

Result<int64_t> ParseMillis(std::string_view text, std::string_view flag) {
  CHRONOQ_ASSIGN_OR_RETURN(Duration d, ParseDuration(text, flag));
  if (d % std::chrono::milliseconds(1) != Duration::zero()) {
    return Status::InvalidArgument(flag, "use whole milliseconds");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

Result<int64_t> ParseMillisIn(std::string_view text, std::string_view flag, Duration min,
                              Duration max, std::string_view range) {
  CHRONOQ_ASSIGN_OR_RETURN(const int64_t ms, ParseMillis(text, flag));
  if (std::chrono::milliseconds(ms) < min || std::chrono::milliseconds(ms) > max) {
    return Status::InvalidArgument(flag, range);
  }
  return ms;
}

Result<json> ParseRunAt(std::string_view text, std::string_view flag) {
  int64_t ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return json(ms);
  const Result<Timestamp> t = ParseTime(text, flag);
  if (!t.ok()) {
    return Status::InvalidArgument(flag, "not an RFC 3339 time (2026-11-22T03:00:00Z) or epoch ms");
  }
  return json(std::string(text));
}

Result<uint64_t> ParseToken(std::string_view text) {
  uint64_t token = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::InvalidArgument("--token", "not a lease token (a positive integer)");
  }
  return token;
}

Result<json> ParseJson(const std::string& text, std::string_view flag) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    const std::string what = e.what();
    const size_t at = what.find("at line ");
    const std::string where =
        at == std::string::npos ? "" : " (" + what.substr(at, what.find(':', at) - at) + ")";
    return Status::InvalidArgument(flag, "not valid JSON" + where);
  }
}

Result<std::string> ReadAll(std::istream& in, std::string_view what) {
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::InvalidArgument(what, "cannot read");
  return text;
}

Result<std::string> ReadFile(const std::string& path, std::string_view flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return Status::InvalidArgument(
        flag,
        "cannot read " + path + ": " + std::error_code(errno, std::generic_category()).message());
  }
  return ReadAll(file, flag);
}

Result<std::optional<json>> ReadPayload(const PayloadFlags& flags, const CliIo& io) {
  // --payload takes JSON, '-' (stdin) or @FILE (@-: stdin). No JSON text
  // starts with '@', so the forms cannot be confused.
  std::string_view flag;
  std::optional<std::string> path;  // what to read: a file, or '-' for stdin
  std::string text;
  if (Given(flags.text_opt)) {
    flag = "--payload";
    if (flags.text == "-") {
      path = "-";
    } else if (flags.text.starts_with('@')) {
      path = flags.text.substr(1);
      if (path->empty()) return Status::InvalidArgument(flag, "@ needs a file name (@- is stdin)");
    } else {
      text = flags.text;
    }
  } else if (Given(flags.file_opt)) {
    flag = "--payload-file";
    path = flags.file;
  } else {
    return std::optional<json>();
  }
  if (path == "-") {
    CHRONOQ_ASSIGN_OR_RETURN(text, ReadAll(io.in, "stdin"));
  } else if (path.has_value()) {
    CHRONOQ_ASSIGN_OR_RETURN(text, ReadFile(*path, flag));
  }
  CHRONOQ_ASSIGN_OR_RETURN(json parsed, ParseJson(text, flag));
  return std::optional<json>(std::move(parsed));
}

// ---------------------------------------------------------------------------
// Output helpers.

std::string Show(const json& j, const std::string& key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

json Member(const json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? json() : *it;
}

std::string ShowMillis(const json& ms) {
  if (!ms.is_number()) return "-";
  const int64_t v = ms.get<int64_t>();
  char buf[48];
  if (v < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(v));
  } else if (v < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(v) / 1000);
  } else if (v < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(v / 60'000),
                  static_cast<long long>(v / 1000 % 60));
  } else if (v < 86'400'000) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(v / 3'600'000),
                  static_cast<long long>(v / 60'000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%lldh", static_cast<long long>(v / 86'400'000),
                  static_cast<long long>(v / 3'600'000 % 24));
  }
  return buf;
}

std::string ShowCount(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string ProgressBar(double done) {
  done = std::clamp(done, 0.0, 1.0);
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(done * kWidth);
  char percent[8];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(done * 100));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(kWidth - filled), '-') + "] " + percent;
}

const std::vector<std::string> kTaskStates = {"scheduled", "running", "succeeded", "cancelled",
                                              "dead"};

std::string ShowSeconds(double seconds) {
  if (seconds >= 1 && seconds < 60) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fs", seconds);
    return buf;
  }
  return ShowMillis(json(std::llround(seconds * 1000)));
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

bool HasKey(const json& t) { return Member(t, "key").is_string(); }

// ---------------------------------------------------------------------------
// Talking to the server.

json ErrorOf(const std::string& raw) {
  const json body = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  const json error = Member(body, "error");
  return error.is_object() ? error : json();
}

std::string DescribeError(const Reply& reply) {
  if (const json e = ErrorOf(reply.raw); !e.is_null()) {
    std::string text = Show(e, "code") + ": " + Show(e, "message");
    if (const json field = Member(e, "field");
        field.is_string() && !field.get<std::string>().empty()) {
      text += " (field " + field.get<std::string>() + ")";
    }
    return text;
  }
  std::string line = reply.raw.substr(0, reply.raw.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return "HTTP " + std::to_string(reply.status) + (line.empty() ? "" : ": " + line);
}

std::string ErrorCodeOf(const Reply& reply) {
  const json code = Member(ErrorOf(reply.raw), "code");
  return code.is_string() ? code.get<std::string>() : "";
}

Result<std::unique_ptr<MultiHttpClient>> Session::NewClient() const {
  return MultiHttpClient::Create(base_url_, client_.timeout(), "url", client_.tls());
}

HttpHeaders Session::Headers(bool with_body) const {
  HttpHeaders headers = {{"Accept", "application/json"},
                         {"User-Agent", "chronoq/" CHRONOQ_VERSION}};
  if (with_body) headers.emplace_back("Content-Type", "application/json");
  if (!token_.empty()) headers.emplace_back("Authorization", "Bearer " + token_);
  return headers;
}

Result<HttpResponse> Session::Send(std::string_view method, const std::string& target,
                                   const json* body) {
  std::string text;
  if (body != nullptr) {
    try {
      text = body->dump();
    } catch (const json::type_error&) {
      return Status(StatusCode::kInvalidArgument, "arguments must be valid UTF-8");
    }
  }
  return client_.Send(method, target, text, Headers(body != nullptr));
}

Result<HttpResponse> Session::SendText(std::string_view method, const std::string& target,
                                       std::string_view text) {
  return client_.Send(method, target, text, Headers(/*with_body=*/true));
}

int Session::Call(std::string_view method, const std::string& target, const json* body,
                  Reply& reply, bool report_errors) {
  Result<HttpResponse> r = Send(method, target, body);
  if (!r.ok()) {
    io_.err << "error: " << r.status().message() << "\n";
    return r.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitUnreachable;
  }
  reply.status = r->status;
  reply.raw = std::move(r->body);
  if (reply.status < 200 || reply.status > 299) {
    if (report_errors) ReportError(reply);
    return kExitServerError;
  }
  if (reply.raw.empty()) {
    reply.body = json::object();
    return kExitOk;
  }
  reply.body = json::parse(reply.raw, nullptr, /*allow_exceptions=*/false);
  if (reply.body.is_discarded()) {
    io_.err << "error: the server's answer (HTTP " << reply.status << ") is not JSON\n";
    return kExitServerError;
  }
  return kExitOk;
}

int Session::Simple(std::string_view method, const std::string& target, const json* body,
                    const std::function<void(const Reply&)>& human) {
  Reply reply;
  if (const int code = Call(method, target, body, reply); code != kExitOk) return code;
  if (json_output_) {
    PrintRaw(reply.raw);
  } else {
    human(reply);
  }
  return kExitOk;
}

void Session::PrintRaw(const std::string& raw) {
  if (raw.empty()) return;
  io_.out << raw;
  if (raw.back() != '\n') io_.out << "\n";
}

void Session::ReportError(const Reply& reply) {
  io_.err << "error: " << DescribeError(reply) << "\n";
}

std::string TaskPath(const std::string& id) { return "/v1/tasks/" + PercentEncode(id); }
std::string QueuePath(const std::string& queue) { return "/v1/queues/" + PercentEncode(queue); }

void AddParam(std::string& query, std::string_view name, const std::string& value) {
  query += (query.empty() ? "?" : "&") + std::string(name) + "=" + PercentEncode(value);
}

int ListPages(Session& s, const std::string& path, const std::string& query, const std::string& key,
              const std::string& cursor, bool all,
              const std::function<void(std::ostream&, const json&)>& table) {
  const CliIo& io = s.io();
  const auto target = [&](const std::string& from) {
    if (from.empty()) return path + query;
    return path + query + (query.empty() ? "?" : "&") + "cursor=" + PercentEncode(from);
  };
  if (!all) {
    return s.Simple("GET", target(cursor), nullptr, [&](const Reply& r) {
      table(io.out, Member(r.body, key));
      const json next = Member(r.body, "next_cursor");
      if (next.is_string() && !next.get<std::string>().empty()) {
        io.err << "more: --cursor " << next.get<std::string>() << " (or --all)\n";
      }
    });
  }
  json items = json::array();
  std::string next;
  while (true) {
    Reply r;
    if (const int code = s.Call("GET", target(next), nullptr, r); code != kExitOk) return code;
    const json page = Member(r.body, key);
    if (page.is_array()) items.insert(items.end(), page.begin(), page.end());
    const json cur = Member(r.body, "next_cursor");
    if (!cur.is_string() || cur.get<std::string>().empty()) break;
    if (cur.get<std::string>() == next) {
      io.err << "error: the server returned the same cursor twice\n";
      return kExitServerError;
    }
    next = cur.get<std::string>();
  }
  if (s.json_output()) {
    io.out << json{{key, items}, {"next_cursor", nullptr}}.dump() << "\n";
  } else {
    table(io.out, items);
  }
  return kExitOk;
}

int Usage(const CliIo& io, const Status& s) {
  io.err << "error: " << s.message() << "\n";
  return kExitUsage;
}

}  // namespace chronoq::cli
