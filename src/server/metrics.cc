#include "server/metrics.h"

#include <fmt/format.h>

namespace chronoq::server {
namespace {

void Header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// One unlabelled sample of a counter or gauge.
void Sample(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            uint64_t value) {
  Header(out, name, type, help);
  fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
}
void Counter(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  Sample(out, name, "counter", help, value);
}
void Gauge(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  Sample(out, name, "gauge", help, value);
}

// Label values escape backslash, double quote and newline.
std::string Label(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Histogram(std::string& out, std::string_view name, std::string_view help,
               const EngineStats::Histogram& h) {
  Header(out, name, "histogram", help);
  for (size_t i = 0; i < h.bounds.size() && i < h.counts.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds[i],
                   h.counts[i]);
  }
  fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n",
                 name, h.total, name, h.sum, name, h.total);
}

}  // namespace

std::string RenderMetrics(const EngineStats& stats, const std::vector<QueueInfo>& queues,
                          const ApiCounters& http) {
  std::string out;
  Header(out, "chronoq_tasks", "gauge", "Tasks by queue and state.");
  for (const QueueInfo& q : queues) {
    for (int s = 0; s < static_cast<int>(q.counts.size()); ++s) {
      fmt::format_to(std::back_inserter(out), "chronoq_tasks{{queue=\"{}\",state=\"{}\"}} {}\n",
                     Label(q.name), TaskStateName(static_cast<TaskState>(s)), q.counts[s]);
    }
  }
  Header(out, "chronoq_queue_oldest_due_lateness_seconds", "gauge",
         "How late the earliest due task of the queue is.");
  for (const QueueInfo& q : queues) {
    fmt::format_to(std::back_inserter(out),
                   "chronoq_queue_oldest_due_lateness_seconds{{queue=\"{}\"}} {}\n", Label(q.name),
                   std::chrono::duration<double>(q.oldest_due_lateness).count());
  }
  Header(out, "chronoq_queue_paused", "gauge", "1 when the queue is paused.");
  for (const QueueInfo& q : queues) {
    fmt::format_to(std::back_inserter(out), "chronoq_queue_paused{{queue=\"{}\"}} {}\n",
                   Label(q.name), q.paused ? 1 : 0);
  }
  Counter(out, "chronoq_tasks_enqueued_total", "Tasks stored by enqueue.", stats.enqueued);
  Counter(out, "chronoq_tasks_acked_total", "Tasks that succeeded.", stats.acked);
  Counter(out, "chronoq_tasks_failed_total", "Failed attempts (fail or lapsed lease).",
          stats.failed);
  Counter(out, "chronoq_tasks_dead_total", "Tasks that went dead.", stats.dead);
  Counter(out, "chronoq_commits_total", "Store commits.", stats.commits);
  Gauge(out, "chronoq_store_up", "1 while the store answers, 0 while it cannot be reached.",
        stats.store_up ? 1 : 0);
  Gauge(out, "chronoq_locks_held", "Keyed locks held.", stats.locks_held);
  Gauge(out, "chronoq_lock_waiters", "Lock acquisitions waiting.", stats.lock_waiters);
  Gauge(out, "chronoq_lock_keys", "Lock keys in memory (held or waited for).", stats.lock_keys);
  Histogram(out, "chronoq_commit_ops", "Operations per commit (group commit batch size).",
            stats.commit_ops);
  Histogram(out, "chronoq_dispatch_lateness_seconds", "Time from a task's run_at to its claim.",
            stats.dispatch_lateness_s);
  Counter(out, "chronoq_http_requests_total", "HTTP requests answered.", http.requests.load());
  Counter(out, "chronoq_http_client_errors_total", "HTTP requests answered 4xx.",
          http.client_errors.load());
  Counter(out, "chronoq_http_server_errors_total", "HTTP requests answered 5xx.",
          http.server_errors.load());
  return out;
}

}  // namespace chronoq::server
