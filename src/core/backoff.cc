#include "core/backoff.h"

#include <algorithm>

namespace chronoq {

Duration BackoffDelay(const Backoff& backoff, int attempt, std::mt19937_64& rng) {
  // Double without overflowing: stop once the cap is reached.
  Duration ceiling = std::max(backoff.base, Duration(0));
  for (int i = 1; i < attempt && ceiling < backoff.cap; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, backoff.cap);
  if (ceiling <= Duration::zero()) return Duration::zero();
  std::uniform_int_distribution<int64_t> dist(0, ceiling.count());
  return Duration(dist(rng));
}

}  // namespace chronoq
