// Retry delays: exponential with full jitter, capped.
#pragma once

#include <random>

#include "chronoq/task.h"

namespace chronoq {

// The delay before retry number `attempt` (1 = the first retry after the
// first failure): uniform in [0, min(cap, base * 2^(attempt-1))].
Duration BackoffDelay(const Backoff& backoff, int attempt, std::mt19937_64& rng);

}  // namespace chronoq
