#include "server/ui.h"

#include <string>

#include "chronoq/status.h"

#include "codec/json_codec.h"

namespace chronoq::server {

namespace {

// The type of a dashboard file, by its extension.
std::string_view ContentType(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// Scripts, styles and API calls from this server only; no frames, no
// plugins, no inline script: a payload shown on a page cannot run.
constexpr std::string_view kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

void AddPageHeaders(ApiResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(kContentSecurityPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  // Served from the binary: a new chronoqd may bring new files.
  r.headers.emplace_back("Cache-Control", "no-cache");
}

}  // namespace

bool IsUiPath(std::string_view path) { return path == "/" || path.substr(0, 4) == "/ui/"; }

ApiResponse UiResponse(std::string_view method, std::string_view path) {
  if (method != "GET") return MethodNotAllowed(method, path, "GET");
  ApiResponse r;
  if (path == "/") {
    r.status = 302;
    r.content_type = "text/plain; charset=utf-8";
    r.headers.emplace_back("Location", "/ui/");
    return r;
  }
  std::string_view name = path.substr(4);  // after "/ui/"
  if (name.empty()) name = "index.html";
  for (const EmbeddedFile& f : UiFiles()) {
    if (f.name != name) continue;
    r.content_type = std::string(ContentType(f.name));
    r.body = std::string(f.bytes);
    AddPageHeaders(r);
    return r;
  }
  return ErrorResponse(Status::NotFound("no dashboard file " + std::string(path)));
}

}  // namespace chronoq::server
