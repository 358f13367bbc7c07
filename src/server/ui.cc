#include "server/ui.h"

#include <array>
#include <string>

#include "chronoq/status.h"

#include "codec/json_codec.h"

namespace chronoq::server {

// The files' bytes, generated from src/server/ui/ by cmake/EmbedFile.cmake.
std::string_view UiIndexHtml();
std::string_view UiAppJs();
std::string_view UiStyleCss();

namespace {

struct UiFile {
  std::string_view name;
  std::string_view content_type;
  std::string_view (*bytes)();
};

constexpr std::array<UiFile, 3> kFiles = {{
    {"index.html", "text/html; charset=utf-8", UiIndexHtml},
    {"app.js", "text/javascript; charset=utf-8", UiAppJs},
    {"style.css", "text/css; charset=utf-8", UiStyleCss},
}};

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
  for (const UiFile& f : kFiles) {
    if (f.name != name) continue;
    r.content_type = std::string(f.content_type);
    r.body = std::string(f.bytes());
    AddPageHeaders(r);
    return r;
  }
  return ErrorResponse(Status::NotFound("no dashboard file " + std::string(path)));
}

}  // namespace chronoq::server
