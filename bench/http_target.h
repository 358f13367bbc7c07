// http_target.h: chronoq-bench's `http` target: the workloads of
// BENCHMARKS.md against chronoqd over loopback, on keep-alive connections.
//
// Without Options::url every workload run starts its own chronoqd
// (Options::chronoqd) on 127.0.0.1:0 with a fresh data directory
// DIR/http-<workload>[-<mode>]/ (its log in chronoqd.log there) and stops it
// with SIGTERM afterwards; a non-zero exit status is an error. With a url, the
// workloads use that server, each on queues of its own; W5 then fails, since
// it reads the server's /proc entries.
//
// The client side is a small blocking HTTP/1.1 client (one socket per
// connection, TCP_NODELAY, request bodies built before the clock starts), so
// that on a 2-core machine the load generator takes as little CPU from the
// server as it can. Any non-2xx answer, a per-task ack failure or a lost
// connection aborts the workload with a BenchError naming the request.
#pragma once

#include <cstdint>

#include "bench_common.h"

namespace chronoq::bench {

// W1: enqueue throughput. mode "batch": POST /v1/tasks/batch with 1,000 tasks
// per request (Options::w1_batch_connections connections); mode "single":
// POST /v1/tasks, one task per request, from 32 connections with one thread
// each. Tasks are due 1-600 s ahead; figure: tasks/s.
void RunHttpW1(const Options& o, int64_t n, uint64_t seed);

// W2: drains N tasks due now with Options::concurrency workers, each on its own
// connection claiming Options::batch tasks at a time and acknowledging them with
// one POST /v1/acks; figure: tasks/s from the first claim to the last ack.
void RunHttpW2(const Options& o, int64_t n, uint64_t seed);

// W3: N tasks due evenly over 10 s, claimed by long-polling workers;
// lateness = arrival of the claim answer - run_at, p50/p99/max in ms.
void RunHttpW3(const Options& o, int64_t n, uint64_t seed);

// W6: keyed FIFO. N tasks due now over 100 keys (task i has key "k<i % 100>"
// and payload {"k":i % 100,"i":i / 100}), enqueued with POST /v1/tasks/batch
// (1,000 per request) and drained as W2 drains, by Options::w6_workers
// connections claiming Options::batch tasks at a time. Each key's order is
// checked as the workers see it (KeyOrderChecker). Mode "unkeyed" enqueues
// the same tasks without keys, "keyed" with keys (max_in_flight_per_key at
// its default, 1); with no --mode both run, unkeyed first, each on a chronoqd
// of its own, and the keyed line carries the ratio of their tasks/s.
void RunHttpW6(const Options& o, int64_t n, uint64_t seed);

// W7: keyed locks. N acquire+release pairs (POST /v1/locks/{key}/acquire
// then /release) on distinct keys from 32 connections, then N/4 pairs on one
// key from 8 connections; figures: pairs/s for each.
void RunHttpW7(const Options& o, int64_t n, uint64_t seed);

// W5: chronoqd holding N tasks due in 1 h with long-polling claims open, idle
// for Options::idle_s: voluntary context switches per second summed over
// chronoqd's threads, and its CPU %. Needs a chronoqd the bench starts.
void RunHttpW5(const Options& o, int64_t n, uint64_t seed);

// W9: failover (failover.cc). Starts a throwaway PostgreSQL
// (scripts/pg-cluster.sh; with Options::store, a schema of that database
// instead) and three chronoqd --cluster nodes with the default heartbeat and
// lease, enqueues N tasks due evenly over one minute (from 5 s on) and a
// stream of 200 tasks/s due 10 s after their create, and runs 8 workers
// (long-polling claims of up to 100, wait 1 s, lease 30 s, then one
// POST /v1/acks), each moving to the next node on a failed connection, a
// 3 s silence or a 502/503/504. Then Options::kills times: SIGKILL the leader
// (mode "sigstop": SIGSTOP it), measure the time to the first claim sent
// after the kill that comes back with tasks, start the node again (SIGCONT
// it) and wait until it stands by and the cluster has settled for 2 s. At the
// end the stream stops, the queue drains, and every acknowledged create must
// have succeeded. One line per kill (failover_ms, lateness of the tasks due
// between the kill and the recovery), then a summary: failover p50/p99/max,
// lateness in the windows and overall, lost, doubled (claimed again after an
// ack answered ok), redelivered. Node logs: DIR/http-W9-<mode>/.
void RunHttpW9(const Options& o, int64_t n, uint64_t seed);

// W-webhook: chronoqd delivers n webhook tasks (enqueued on a paused queue,
// then resumed) to a fast receiver in the bench process over keep-alive
// connections; deliveries per second from the resume until the last task
// succeeded, and until the receiver answered the last request.
void RunHttpWebhook(const Options& o, int64_t n, uint64_t seed);

}  // namespace chronoq::bench
