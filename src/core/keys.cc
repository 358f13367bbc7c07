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
#include <algorithm>
#include <vector>

#include "core/core.h"

namespace chronoq {

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

Status Core::RefetchHead(Keys::iterator it, Timestamp turn,
                         const std::optional<Window::Key>& after) {
  Withdraw(it);
  std::optional<DueEntry> from;
  if (after) from = DueEntry{after->seq, it->first.first, after->due, after->priority};
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<DueEntry> head,
                           store_.KeyHead(it->first.first, it->first.second, from));
  it->second.head.reset();
  if (head) it->second.head = Window::Key{head->due, head->priority, head->seq};
  Offer(it, turn);
  MaybeForget(it);
  return {};
}

void Core::MaybeForget(Keys::iterator it) {
  const KeyState& k = it->second;
  if (k.in_flight > 0 || (k.head && Loaded(k.head->due))) return;
  // Its head (if any) lies beyond what is loaded: a refill finds it again.
  Withdraw(it);
  keys_.erase(it);
}

Status Core::KeyedArrived(int64_t qid, const std::string& key, const Window::Key& at) {
  auto it = keys_.find({qid, key});
  if (it != keys_.end()) {
    KeyState& k = it->second;
    if (k.head && !(at < *k.head)) return {};  // behind the head: the index has it
    Withdraw(it);
    k.head = at;
    Offer(it, Timestamp::min());
    return {};
  }
  if (at.due < window_.horizon()) {
    // Nothing of the key was loaded, so nothing of it is due before the
    // horizon but this task: it is the head.
    it = keys_.try_emplace({qid, key}).first;
    it->second.head = at;
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
  const Window::Key taken = *k.head;
  // The claim popped its window entry already.
  k.queued.reset();
  ++k.in_flight;
  NotePending(it->first.first, it->first.second, -1);
  // The taken head is still scheduled in the store until the claim's
  // statement runs: the next head is the first after it. in_flight > 0, so
  // the key stays.
  if (Status s = RefetchHead(it, now, taken); !s.ok()) {
    // The store failed before the head changed: the key is as it was.
    --k.in_flight;
    NotePending(it->first.first, it->first.second, 1);
    Offer(it, Timestamp::min());
    return s;
  }
  return std::optional<Keys::iterator>(it);
}

Status Core::UntakeHeads(const std::vector<Keys::iterator>& taken) {
  // The heads are still scheduled: give their places back, then read each
  // key's head again (once per key: it may be forgotten).
  std::vector<Keys::iterator> keys;
  for (Keys::iterator it : taken) {
    --it->second.in_flight;
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
  MaybeForget(it);
  return {};
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
  Result<int64_t> n = store_.CountKeyPending(q.qid, key);
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
