// Window: the near future, in memory.
//
// Only scheduled tasks due before `horizon` live here, per queue, ordered by
// (due, priority, seq): a claim takes the first entry whose due has passed.
// Everything due at or after the horizon stays in the Store until the engine
// loop refills the window from the Store's (state, due) index. Invariant kept
// by the engine loop: every scheduled row with due < horizon is in the window,
// and nothing else is. This is why ten million tasks due next month cost disk,
// not memory.
//
// Not thread-safe: confined to the engine loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include <absl/container/btree_set.h>

#include "chronoq/clock.h"

namespace chronoq {

class Window {
 public:
  struct Key {
    Timestamp due;
    int priority = 0;
    int64_t seq = 0;
    friend auto operator<=>(const Key&, const Key&) = default;
  };

  // True when a task due at `due` belongs in memory.
  bool Covers(Timestamp due) const { return due < horizon_; }
  Timestamp horizon() const { return horizon_; }
  void set_horizon(Timestamp h) { horizon_ = h; }

  void Add(int64_t qid, const Key& key);
  // Returns false when the key was not present.
  bool Remove(int64_t qid, const Key& key);
  // Removes and returns the first entry of `qid` due at or before `now`.
  std::optional<Key> PopDue(int64_t qid, Timestamp now);
  // The earliest due of `qid`, if it has any entry.
  std::optional<Timestamp> EarliestDue(int64_t qid) const;
  // How many entries of `qid` are due at or before `now`: O(1) when all
  // are, else one step per due entry.
  size_t CountDue(int64_t qid, Timestamp now) const;

  size_t size() const { return size_; }
  void Clear();

 private:
  // A B-tree, not a std::set: with W1's tasks due at random instants a
  // std::set of 400,000 entries missed the cache at every level of an insert
  // (Window::Add, a sixth of the engine loop's time; docs/BENCHMARKS.md).
  using Keys = absl::btree_set<Key>;
  std::unordered_map<int64_t, Keys> queues_;
  size_t size_ = 0;
  Timestamp horizon_ = Timestamp::min();
};

}  // namespace chronoq
