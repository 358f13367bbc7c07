// Per-key ordering: the Core's keyed tasks (see KeyState in core/core.h and
// docs/KEYS.md).
//
// A key's tasks waiting to start stay in the store's key index; memory holds,
// per key, how many of its tasks have started and not finished, and its head.
// The head alone is put in the window, and only while the key has room, so a
// key with a million waiting tasks costs one window entry and a blocked key
// costs none. When the head is claimed (or a place frees) the next head is
// read from the index and queued at `turn` = now: behind every task already
// due, which is what rotates claims among keys.
//
// The index keeps a key's tasks after they start (store.h), so each search
// starts from the key's cursor: in memory, the head taken last (or just
// before a task that arrived earlier than that); saved to the store every
// kCursorSaveEvery heads and when the key is forgotten, for searches after a
// restart.
#include <algorithm>
#include <vector>

#include "core/core.h"

namespace chronoq {
namespace {

// A search from the saved cursor steps over at most this many started tasks.
constexpr int kCursorSaveEvery = 64;

KeyPosition PositionOf(const Window::Key& k) { return {k.due, k.priority, k.seq}; }

}  // namespace

Status Core::LoadKeys() {
  // Running keyed tasks were counted by Recover(); tasks waiting to retry hold
  // their places too.
  CHRONOQ_ASSIGN_OR_RETURN(auto retries, store_.LoadKeyRetries());
  for (auto& id : retries) ++keys_[std::move(id)].in_flight;
  for (auto it = keys_.begin(); it != keys_.end();) {
    // in_flight > 0: RefetchHead keeps the key, so `it` stays valid.
    auto next = std::next(it);
    CHRONOQ_RETURN_IF_ERROR(RefetchHead(it, Timestamp::min()));
    it = next;
  }
  return {};
}

void Core::CursorBefore(KeyState& k, const Window::Key& at) {
  const KeyPosition before = KeyPosition::Before(at.due, at.priority, at.seq);
  if (!k.cursor || before < *k.cursor) k.cursor = before;
}

int Core::KeyLimit(int64_t qid) const {
  auto it = queues_.find(qid);
  if (it == queues_.end()) return 1;
  return it->second.settings.max_in_flight_per_key.value_or(1);
}

void Core::Offer(Keys::iterator it, Timestamp turn) {
  KeyState& k = it->second;
  if (!k.head || k.queued || k.in_flight >= KeyLimit(it->first.first)) return;
  k.queued = Window::Key{std::max(k.head->due, turn), k.head->priority, k.head->seq};
  window_.Add(it->first.first, *k.queued);
  queued_heads_[k.head->seq] = it;
}

void Core::Withdraw(Keys::iterator it) {
  KeyState& k = it->second;
  if (!k.queued) return;
  window_.Remove(it->first.first, *k.queued);
  queued_heads_.erase(k.queued->seq);
  k.queued.reset();
}

Status Core::RefetchHead(Keys::iterator it, Timestamp turn) {
  Withdraw(it);
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<DueEntry> head,
                           store_.KeyHead(it->first.first, it->first.second, it->second.cursor));
  it->second.head.reset();
  if (head) it->second.head = Window::Key{head->due, head->priority, head->seq};
  Offer(it, turn);
  return MaybeForget(it);
}

Status Core::SaveCursor(Keys::iterator it) {
  KeyState& k = it->second;
  if (k.takes_unsaved == 0 || !k.cursor) return {};
  CHRONOQ_RETURN_IF_ERROR(store_.SaveKeyCursor(it->first.first, it->first.second, *k.cursor));
  k.takes_unsaved = 0;
  return {};
}

Status Core::MaybeForget(Keys::iterator it) {
  const KeyState& k = it->second;
  if (k.in_flight > 0 || (k.head && Loaded(k.head->due))) return {};
  // Its head (if any) lies beyond what is loaded: a refill finds it again.
  CHRONOQ_RETURN_IF_ERROR(SaveCursor(it));
  Withdraw(it);
  keys_.erase(it);
  return {};
}

Status Core::KeyedArrived(int64_t qid, const std::string& key, const Window::Key& at) {
  auto it = keys_.find({qid, key});
  if (it != keys_.end()) {
    KeyState& k = it->second;
    if (k.head && !(at < *k.head)) return {};  // behind the head: the index has it
    Withdraw(it);
    k.head = at;
    CursorBefore(k, at);
    Offer(it, Timestamp::min());
    return {};
  }
  if (at.due < window_.horizon()) {
    // Nothing of the key was loaded, so nothing of it is due before the
    // horizon but this task: it is the head.
    it = keys_.try_emplace({qid, key}).first;
    it->second.head = at;
    CursorBefore(it->second, at);
    Offer(it, Timestamp::min());
    return {};
  }
  if (Loaded(at.due)) {
    // In the bucket a full window stopped in, whose rows are loaded only in
    // part: the index knows the head.
    return RefetchHead(keys_.try_emplace({qid, key}).first, Timestamp::min());
  }
  AddToWindow(qid, at);  // notes it as beyond the horizon
  return {};
}

Status Core::KeyedLeft(int64_t qid, const std::string& key, int64_t seq) {
  auto it = keys_.find({qid, key});
  if (it == keys_.end() || !it->second.head || it->second.head->seq != seq) return {};
  return RefetchHead(it, Timestamp::min());
}

Result<std::optional<Core::Keys::iterator>> Core::TakeHead(const Window::Key& entry,
                                                           Timestamp now) {
  auto h = queued_heads_.find(entry.seq);
  if (h == queued_heads_.end()) return std::optional<Keys::iterator>();
  const Keys::iterator it = h->second;
  queued_heads_.erase(h);
  KeyState& k = it->second;
  const std::optional<KeyPosition> cursor = k.cursor;
  // The claim popped its window entry already.
  k.queued.reset();
  ++k.in_flight;
  NotePending(it->first.first, it->first.second, -1);
  // The taken head is still scheduled in the store until the claim's
  // statement runs: the next head is the first after it. in_flight > 0, so
  // the key stays. (A cursor saved now stops just before the taken head:
  // the store sees it waiting still.)
  k.cursor = PositionOf(*k.head);
  Status s;
  if (++k.takes_unsaved >= kCursorSaveEvery) s = SaveCursor(it);
  if (s.ok()) s = RefetchHead(it, now);
  if (!s.ok()) {
    // The store failed before the head changed: the key is as it was.
    --k.in_flight;
    NotePending(it->first.first, it->first.second, 1);
    k.cursor = cursor;
    Offer(it, Timestamp::min());
    return s;
  }
  return std::optional<Keys::iterator>(it);
}

Status Core::UntakeHeads(const std::vector<Keys::iterator>& taken) {
  // The heads are still scheduled: give their places back, then read each
  // key's head again (once per key: it may be forgotten), from the saved
  // cursor, which the store kept before them.
  std::vector<Keys::iterator> keys;
  for (Keys::iterator it : taken) {
    --it->second.in_flight;
    it->second.cursor.reset();
    NotePending(it->first.first, it->first.second, 1);
    if (std::find(keys.begin(), keys.end(), it) == keys.end()) keys.push_back(it);
  }
  for (Keys::iterator it : keys) CHRONOQ_RETURN_IF_ERROR(RefetchHead(it, Timestamp::min()));
  return {};
}

Status Core::KeyReleased(int64_t qid, const std::string& key, Timestamp now) {
  auto it = keys_.find({qid, key});
  if (it == keys_.end()) return Status::Internal("key " + key + " released but not held");
  it->second.in_flight = std::max(0, it->second.in_flight - 1);
  Offer(it, now);
  return MaybeForget(it);
}

void Core::ReofferKeys(int64_t qid, Timestamp now) {
  const int limit = KeyLimit(qid);
  for (auto it = keys_.lower_bound({qid, std::string()});
       it != keys_.end() && it->first.first == qid; ++it) {
    if (it->second.in_flight >= limit) {
      Withdraw(it);
    } else {
      Offer(it, now);
    }
  }
}

Status Core::CountPending(const QueueState& q, const std::string& key) {
  auto [it, fresh] = pending_.try_emplace({q.qid, key}, 0);
  if (!fresh) return {};
  std::optional<KeyPosition> from;
  if (auto k = keys_.find({q.qid, key}); k != keys_.end()) from = k->second.cursor;
  Result<int64_t> n = store_.CountKeyPending(q.qid, key, from);
  if (!n.ok()) {
    pending_.erase(it);
    return n.status();
  }
  it->second = *n;
  return {};
}

Status Core::AdmitKeyed(const QueueState& q, const std::string& key, std::string_view field) {
  if (!q.settings.max_pending_per_key) {
    NotePending(q.qid, key, 1);
    return {};
  }
  CHRONOQ_RETURN_IF_ERROR(CountPending(q, key));
  auto it = pending_.find({q.qid, key});
  const int64_t limit = *q.settings.max_pending_per_key;
  if (it->second >= limit) {
    return {StatusCode::kResourceExhausted,
            "key " + key + " of queue " + q.name + " already has " + std::to_string(it->second) +
                " tasks waiting to start (max_pending_per_key " + std::to_string(limit) + ")",
            std::string(field)};
  }
  ++it->second;
  return {};
}

void Core::NotePending(int64_t qid, const std::string& key, int64_t delta) {
  auto it = pending_.find({qid, key});
  if (it == pending_.end()) return;
  it->second += delta;
  if (it->second <= 0) pending_.erase(it);
}

}  // namespace chronoq
