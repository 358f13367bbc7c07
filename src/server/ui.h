// The dashboard: the files of src/server/ui/, compiled into chronoqd and
// served at /ui/ (and / redirects there), on the API's port. They hold no
// data, so they need no token; the page asks for it before calling the API.
#pragma once

#include <string_view>

#include "server/api.h"

namespace chronoq::server {

// Whether `path` (without its query) is the dashboard's: "/" or "/ui/...".
bool IsUiPath(std::string_view path);

// The answer to `method path` for a dashboard path: a redirect from "/" to
// "/ui/", a file with its type and the page's security headers, 404 for no
// such file, 405 for a method other than GET.
ApiResponse UiResponse(std::string_view method, std::string_view path);

}  // namespace chronoq::server
