// GET /metrics: the engine's counters and histograms, tasks by queue and
// state, and the server's request counts, in the Prometheus text format
// (version 0.0.4).
#pragma once

#include <string>
#include <vector>

#include "chronoq/engine.h"

#include "server/api.h"

namespace chronoq::server {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string RenderMetrics(const EngineStats& stats, const std::vector<QueueInfo>& queues,
                          const ApiCounters& http);

}  // namespace chronoq::server
