// chronoq/limits.h: every limit chronoq puts on its input, in one place.
//
// The engine checks each of them (and only the engine: chronoqd's HTTP layer
// reads types, the engine decides what is in range), and each error names
// the field as the HTTP API spells it ("lease_ms", "tasks[3].delay_ms").
// docs/API.md lists the same limits for the HTTP API.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chronoq/clock.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

// --- tasks -------------------------------------------------------------------
inline constexpr size_t kMaxIdBytes = 200;
inline constexpr size_t kMaxKeyBytes = 200;
inline constexpr size_t kMaxQueueNameBytes = 100;
inline constexpr size_t kMaxPayloadBytes = 256 * 1024;
inline constexpr int kMaxAttemptsLimit = 1000;
inline constexpr Duration kMaxDelay = std::chrono::hours(24 * 365 * 100);  // 100 years
// Tasks per batch enqueue, and acknowledgements per call.
inline constexpr size_t kMaxBatchTasks = 10'000;
// A failure's error text (and a webhook's recorded answer) is cut to this.
inline constexpr size_t kMaxErrorBytes = 4096;

// --- attempt history (Task::attempts) ------------------------------------------
// Attempts kept per task by default (EngineOptions::attempt_history), and at most.
inline constexpr int kDefaultAttemptHistory = 10;
inline constexpr int kMaxAttemptHistory = 100;
// Each attempt's error and webhook response are cut to this many bytes (at a
// UTF-8 boundary) ...
inline constexpr size_t kMaxAttemptExcerptBytes = 1024;
// ... and a task's whole stored history (its JSON text) to this many: the
// oldest attempts are dropped first, so the newest always stays (it fits).
inline constexpr size_t kMaxAttemptHistoryBytes = 16 * 1024;
inline constexpr size_t kMaxNodeNameBytes = 200;  // EngineOptions::node

// --- webhook targets -----------------------------------------------------------
inline constexpr size_t kMaxTargetUrlBytes = 2048;
inline constexpr size_t kMaxTargetHeaders = 32;
inline constexpr size_t kMaxTargetHeaderNameBytes = 256;
inline constexpr size_t kMaxTargetHeaderValueBytes = 8192;
inline constexpr Duration kMinTargetTimeout = std::chrono::milliseconds(1);
inline constexpr Duration kMaxTargetTimeout = std::chrono::minutes(5);
inline constexpr Duration kDefaultTargetTimeout = std::chrono::seconds(10);

// --- claims and leases ------------------------------------------------------------
inline constexpr Duration kMinLease = std::chrono::milliseconds(1);
inline constexpr Duration kMaxLease = std::chrono::hours(24 * 7);
inline constexpr Duration kMaxClaimWait = std::chrono::hours(1);
inline constexpr int kMaxClaimBatch = 10'000;
inline constexpr size_t kMaxWorkerNameBytes = 200;  // ClaimRequest::worker
inline constexpr int kMaxListLimit = 1000;

// --- queue settings ---------------------------------------------------------------
inline constexpr int kMaxQueueConcurrency = 100'000;
inline constexpr Duration kMaxQueueBackoffCap = std::chrono::hours(24 * 7);
inline constexpr Duration kMaxQueueRetention = std::chrono::hours(24 * 3650);
inline constexpr int kMaxInFlightPerKey = 100'000;
inline constexpr int64_t kMaxPendingPerKey = 1'000'000'000;
// QueueSettings::final_statuses: at most this many.
inline constexpr size_t kMaxFinalStatuses = 32;
inline constexpr int kMaxRateLimitCount = 1'000'000;
inline constexpr Duration kMaxRateLimitPeriod = std::chrono::hours(24);

// --- keyed locks ------------------------------------------------------------------
inline constexpr size_t kMaxLockKeyBytes = 200;
inline constexpr size_t kMaxLockOwnerBytes = 200;
inline constexpr Duration kMaxLockWait = std::chrono::hours(1);
inline constexpr Duration kMinLockLease = kMinLease;
inline constexpr Duration kMaxLockLease = kMaxLease;

// --- schedules --------------------------------------------------------------------
inline constexpr size_t kMaxScheduleNameBytes = 150;
inline constexpr size_t kMaxCronBytes = 1024;
inline constexpr size_t kMaxZoneBytes = 128;
inline constexpr Duration kMinScheduleInterval = std::chrono::milliseconds(1);
inline constexpr Duration kMaxScheduleInterval = std::chrono::hours(24 * 366 * 10);
inline constexpr int kMaxCatchupLimit = 10'000;
inline constexpr int kMaxNextCount = 1000;

// --- in-process workers -------------------------------------------------------------
inline constexpr int kMaxHandlerConcurrency = 1024;

// --- HTTP request bodies -------------------------------------------------------------
inline constexpr int kMaxJsonDepth = 64;

}  // namespace chronoq
#pragma GCC visibility pop
