// chronoqd's log formats: spdlog's text lines by default, or one JSON object
// per line ({"time":...,"level":...,"msg":...}) for log shippers.
#pragma once

namespace chronoq::server {

// Switches the default logger to JSON lines, messages escaped.
void UseJsonLogs();

}  // namespace chronoq::server
