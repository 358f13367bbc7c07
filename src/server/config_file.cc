#include "server/config_file.h"

#include <fstream>
#include <sstream>

namespace chronoq::server {

Result<std::string> ReadConfigFile(const std::string& path, std::string_view field) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument(field, "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::InvalidArgument(field, "cannot read " + path);
  return text.str();
}

std::vector<std::string_view> ConfigFields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsConfigBlank(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !IsConfigBlank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

Status ForEachConfigLine(
    std::string_view text, std::string_view source, std::string_view field,
    const std::function<Status(const std::vector<std::string_view>& fields, int number,
                               const ConfigLineError& error)>& visit) {
  int number = 0;
  while (!text.empty()) {
    ++number;
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const std::vector<std::string_view> fields = ConfigFields(line);
    if (fields.empty() || fields[0].front() == '#') continue;
    const ConfigLineError error = [&](const std::string& reason) {
      return Status::InvalidArgument(
          field, std::string(source) + ":" + std::to_string(number) + ": " + reason);
    };
    CHRONOQ_RETURN_IF_ERROR(visit(fields, number, error));
  }
  return {};
}

}  // namespace chronoq::server
