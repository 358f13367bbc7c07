// fuzz_http_request: raw bytes, as chronoqd reads them off a connection,
// through Beast's parser (chronoqd's limits), the router, the JSON codec and
// the engine on a temporary SQLite store.
//
// An input is up to kMaxRequestsPerInput pipelined requests, handled one
// after another as one connection does (chronoqd reads the next request only
// once the previous one is answered), so the fuzzer can create a task and
// then act on it. Every request must be answered exactly once, within
// kGiveUpAfter, with a status of 200-599, headers without line breaks, and
// a body that parses when it claims to be JSON; an error answer in JSON must
// be chronoq's error shape. After each input the engine must still list its
// queues with counts that make sense, and a task that cannot exist must be
// NotFound. A 500 is a finding too: on a healthy SQLite store every error
// is the client's, or a bug.
//
// Waits. The clock is fake and never moves, so a claim or lock acquisition
// with wait_ms would park for ever. Instead of refusing such inputs (waits
// are worth fuzzing: a waiting claim woken by a later enqueue), the harness
// calls Engine::ReleaseWaitingClaims() every kReleaseEvery while an answer is
// outstanding, as chronoqd does when it stops: waiting claims then answer
// with no tasks, waiting acquisitions with 503.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chronoq/engine.h"

#include "common/check.h"
#include "server/api.h"
#include "server/http_server.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

namespace chronoq::fuzz {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

constexpr int kMaxRequestsPerInput = 4;
// A fresh store every so many inputs keeps a long run's store (and the
// engine's memory) small.
constexpr int kInputsPerStore = 2000;
constexpr auto kReleaseEvery = std::chrono::milliseconds(20);
// Far above any answer's time under ASan, far below ctest's timeout.
constexpr auto kGiveUpAfter = std::chrono::seconds(10);
// A generated id no engine hands out: seqs are (unix ms << 16) | n, and the
// fake clock is in 2026.
constexpr std::string_view kImpossibleTaskId = "_0000000000000001";

// chronoqd's state for the harness: an engine on a fake clock over a fresh
// SQLite file, and the Api on it. Members are destroyed in reverse: the Api,
// the engine, then the clock and the directory they used.
class Chronoqd {
 public:
  Chronoqd() {
    EngineOptions options;
    options.store = dir_.File("chronoq.db");
    options.clock = &clock_;
    options.random_seed = 1;
    Result<std::unique_ptr<Engine>> engine = Engine::Open(std::move(options));
    CHRONOQ_CHECK(engine.ok(), "the engine opens on a fresh SQLite store");
    engine_ = std::move(*engine);
    // Blocking calls run inline: every answer has arrived, or is waiting on
    // the engine's loop, when Handle() returns.
    api_ =
        std::make_unique<server::Api>(*engine_, clock_, [](std::function<void()> call) { call(); });
  }

  Engine& engine() { return *engine_; }
  server::Api& api() { return *api_; }

 private:
  test::TempDir dir_;
  test::FakeClock clock_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::Api> api_;
};

// The one answer to a request; shared with the Respond callback, which may
// run after the harness gave up on it.
struct Answer {
  std::mutex mu;
  std::condition_variable arrived;
  std::optional<server::ApiResponse> response;
  bool answered = false;
};

server::Respond AnswerInto(const std::shared_ptr<Answer>& answer) {
  return [answer](server::ApiResponse r) {
    std::lock_guard lock(answer->mu);
    CHRONOQ_CHECK(!answer->answered, "the Api answered one request twice");
    answer->answered = true;
    answer->response = std::move(r);
    answer->arrived.notify_all();
  };
}

server::ApiResponse AwaitAnswer(Answer& answer, Engine& engine) {
  const auto give_up = std::chrono::steady_clock::now() + kGiveUpAfter;
  std::unique_lock lock(answer.mu);
  while (!answer.arrived.wait_for(lock, kReleaseEvery, [&] { return answer.answered; })) {
    CHRONOQ_CHECK(std::chrono::steady_clock::now() < give_up, "the Api never answered a request");
    // Unlocked: the engine may answer (and take the lock) meanwhile.
    lock.unlock();
    engine.ReleaseWaitingClaims();
    lock.lock();
  }
  return std::move(*answer.response);
}

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

std::string_view HeaderValue(const http::request<http::string_body>& req, beast::string_view name) {
  auto it = req.find(name);
  return it == req.end() ? std::string_view() : View(it->value());
}

// Parses the request at the front of `bytes` and drops it from them.
// nullopt when chronoqd would not hand it to the Api: an unreadable request
// (chronoqd answers 413/431 or closes the connection) or a cross-site write
// (403, then the connection closes).
std::optional<http::request<http::string_body>> ReadRequest(std::string_view& bytes) {
  const server::ServerOptions limits;
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(limits.max_header));
  parser.body_limit(limits.max_body);
  parser.eager(true);
  // Beast's read loop (http/impl/read.hpp): parse what is buffered; read
  // more when the buffer is empty or the parser asks for more. Here nothing
  // more comes: the client closed its side.
  while (!parser.is_done()) {
    beast::error_code ec;
    if (!bytes.empty()) {
      bytes.remove_prefix(parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec));
      if (ec && ec != http::error::need_more) return std::nullopt;
      if (!ec) continue;
    }
    if (!parser.got_some()) return std::nullopt;
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return std::nullopt;
  }
  http::request<http::string_body> req = parser.release();
  if (server::CrossSiteWrite(View(req.method_string()), HeaderValue(req, "Origin"),
                             HeaderValue(req, "Host"), HeaderValue(req, "Sec-Fetch-Site"))) {
    return std::nullopt;
  }
  return req;
}

// As http_server.cc's OnBody builds it.
server::ApiRequest ToApiRequest(http::request<http::string_body>& req) {
  server::ApiRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.body = std::move(req.body());
  if (auto by =
          req.find(beast::string_view(server::kForwardedBy.data(), server::kForwardedBy.size()));
      by != req.end()) {
    request.forwarded_by = std::string(by->value());
  }
  return request;
}

// A header line break in a response would split it (or let a client's bytes
// write headers of their own).
bool FitsOnOneLine(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool IsJson(std::string_view content_type) {
  return content_type.substr(0, content_type.find(';')) == "application/json";
}

// Stops the run (libFuzzer saves the input) unless `holds`, first printing
// the request and its answer.
void Require(bool holds, const char* what, const server::ApiRequest& request,
             const server::ApiResponse& r) {
  if (holds) return;
  std::fprintf(stderr, "request: %s %s\n%.2000s\nanswer: %d %s\n%.2000s\n", request.method.c_str(),
               request.target.c_str(), request.body.c_str(), r.status, r.content_type.c_str(),
               r.body.c_str());
  chronoq::internal::CheckFailed("answer check", what, __FILE__, __LINE__);
}

void CheckAnswer(const server::ApiRequest& request, server::ApiResponse& r) {
  r.Render();
  const auto require = [&](bool holds, const char* what) { Require(holds, what, request, r); };
  // 1xx would be an interim answer and end no request.
  require(r.status >= 200 && r.status <= 599, "the status is a final HTTP status");
  require(r.status != 500, "no internal error (500) on a healthy store");
  require(FitsOnOneLine(r.content_type) && FitsOnOneLine(r.allow),
          "Content-Type and Allow hold no line break");
  for (const auto& [name, value] : r.headers) {
    require(!name.empty() && FitsOnOneLine(name) && FitsOnOneLine(value),
            "every header is one line");
  }
  if (!IsJson(r.content_type)) return;
  const nlohmann::json json = nlohmann::json::parse(r.body, nullptr, false);
  require(!json.is_discarded(), "a body sent as JSON parses as JSON");
  if (r.status < 400) return;
  require(json.is_object() && json.contains("error") && json["error"].is_object(),
          "an error answer is {\"error\":{...}}");
  const nlohmann::json& error = json["error"];
  require(error.contains("code") && error["code"].is_string() &&
              !error["code"].get<std::string>().empty(),
          "an error names its code");
  require(error.contains("message") && error["message"].is_string(), "an error has a message");
}

// Cheap checks that the engine is still sound after an input.
void CheckEngine(Engine& engine) {
  Result<std::vector<QueueInfo>> queues = engine.ListQueues();
  CHRONOQ_CHECK(queues.ok(), "the engine lists its queues");
  for (const QueueInfo& queue : *queues) {
    for (int64_t count : queue.counts) CHRONOQ_CHECK(count >= 0, "no queue counts below zero");
    CHRONOQ_CHECK(queue.due >= 0, "no queue has fewer than zero due tasks");
  }
  Result<Task> missing = engine.Get(kImpossibleTaskId);
  CHRONOQ_CHECK(!missing.ok() && missing.status().code() == StatusCode::kNotFound,
                "a task that was never created is NotFound");
}

Chronoqd& TheChronoqd() {
  // Reopened on a fresh store every kInputsPerStore inputs; destroyed at
  // exit, so the engine's threads end before the process does.
  static std::unique_ptr<Chronoqd> chronoqd;
  static int inputs = 0;
  if (inputs++ % kInputsPerStore == 0) {
    chronoqd.reset();
    chronoqd = std::make_unique<Chronoqd>();
  }
  return *chronoqd;
}

}  // namespace
}  // namespace chronoq::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronoq::fuzz;
  Chronoqd& chronoqd = TheChronoqd();
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < kMaxRequestsPerInput && !bytes.empty(); ++i) {
    std::optional<http::request<http::string_body>> req = ReadRequest(bytes);
    if (!req) break;
    const bool keep_alive = req->keep_alive();
    auto answer = std::make_shared<Answer>();
    chronoq::server::ApiRequest request = ToApiRequest(*req);
    chronoqd.api().Handle(request, AnswerInto(answer));
    chronoq::server::ApiResponse response = AwaitAnswer(*answer, chronoqd.engine());
    CheckAnswer(request, response);
    if (!keep_alive) break;  // chronoqd closes the connection after answering
  }
  CheckEngine(chronoqd.engine());
  return 0;
}
