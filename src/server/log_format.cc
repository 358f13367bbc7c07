#include "server/log_format.h"

#include <chrono>
#include <memory>
#include <string>

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include "chronoq/time.h"

#include "codec/json_codec.h"

namespace chronoq::server {
namespace {

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line = "{\"time\":";
    AppendTime(line, std::chrono::time_point_cast<Duration>(msg.time));
    line += ",\"level\":";
    const auto level = spdlog::level::to_string_view(msg.level);
    AppendString(line, std::string_view(level.data(), level.size()));
    line += ",\"msg\":";
    AppendString(line, std::string_view(msg.payload.data(), msg.payload.size()));
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

void UseJsonLogs() { spdlog::set_formatter(std::make_unique<JsonFormatter>()); }

}  // namespace chronoq::server
