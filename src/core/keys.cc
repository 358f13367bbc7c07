// Per-key ordering: the Core's keyed tasks (see KeyState in core/core.h and
// docs/KEYS.md).
//
// A key's tasks waiting to start stay in the store's key index; memory holds,
// per key, how many of its tasks have started and not finished, and its head.
// The head alone is put in the window, and only while the key has room, so a
// key with a million waiting tasks costs one window entry and a blocked key
// costs none. When the head is claimed (or a place frees) the next head is
// queued at `turn` = now: behind every task already due, which is what
// rotates claims among keys.
//
// The next head comes from `ahead`: the tasks that wait right after the
// head, read with it, kept exact as tasks arrive and leave, and read again
// once used up. A read takes kFirstReadAhead tasks past the head, and twice
// as many as the last each time it came back full, up to kMaxReadAhead: a
// key that is drained costs a few index reads, not one per 17 claims, and a
// key with a few tasks holds only a few. Keys drained in step use theirs up
// in the same claim; the claim reads the next tasks of those that are full
// after taking its heads, all in one store call (RefetchHeads), which is one
// round trip on PostgreSQL instead of one per key. A key with a place left
// reads at once: its next task may join the same claim.
//
// The index keeps a key's tasks after they start (store.h), so each read
// starts from the key's cursor: in memory, the head taken last (or just
// before a task that arrived earlier than that). For reads after a restart
// it is saved to the store every kCursorSaveEvery heads and when the key is
// forgotten, at the end of the cycle (FlushKeyCursors): then every task that
// this cycle made wait to start has arrived (a save queued before an
// arrival is moved back by it), so the saved place is before all of them.
#include <algorithm>
#include <vector>

#include "core/core.h"

namespace chronoq {
namespace {

// Tasks read past the head, at first and at most. Each read is a round trip
// on PostgreSQL: in W6 (100 keys drained one task at a time) reads of 16
// rather than 8 took keyed claims there from 40k to 46k tasks/s, and reads
// growing up to 128 (rather than always 16) another 1.30x over HTTP and
// 1.19x embedded (6 rounds alternated); no change was measured on SQLite.
// A loaded key holds up to kMaxReadAhead * 24 bytes.
constexpr int kFirstReadAhead = 16;
constexpr int kMaxReadAhead = 128;
// A read from the saved cursor steps over at most about this many started
// tasks.
constexpr int kCursorSaveEvery = 64;

KeyPosition PositionOf(const Window::Key& k) { return {k.due, k.priority, k.seq}; }
KeyPosition Before(const Window::Key& k) { return KeyPosition::Before(k.due, k.priority, k.seq); }

}  // namespace

int Core::ReadAhead(const KeyState& k) { return k.read_ahead > 0 ? k.read_ahead : kFirstReadAhead; }

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

Status Core::RefetchHead(Keys::iterator it, Timestamp turn) {
  KeyState& k = it->second;
  CHRONOQ_ASSIGN_OR_RETURN(
      std::vector<DueEntry> rows,
      store_.KeyHeads(it->first.first, it->first.second, k.cursor, 1 + ReadAhead(k)));
  return Refetched(it, rows, turn);
}

Status Core::RefetchHeads(const std::vector<Keys::iterator>& keys, Timestamp turn) {
  if (keys.size() == 1) return RefetchHead(keys.front(), turn);
  std::vector<Store::KeyRead> reads;
  reads.reserve(keys.size());
  for (Keys::iterator it : keys) {
    reads.push_back(
        {it->first.first, &it->first.second, it->second.cursor, 1 + ReadAhead(it->second)});
  }
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<std::vector<DueEntry>> rows, store_.KeyHeadsOf(reads));
  for (size_t i = 0; i < keys.size(); ++i) {
    CHRONOQ_RETURN_IF_ERROR(Refetched(keys[i], rows[i], turn));
  }
  return {};
}

Status Core::Refetched(Keys::iterator it, const std::vector<DueEntry>& rows, Timestamp turn) {
  KeyState& k = it->second;
  k.ahead.clear();
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    k.ahead.push_back(Window::Key{row->due, row->priority, row->seq});
  }
  k.ahead_complete = static_cast<int>(rows.size()) < 1 + ReadAhead(k);
  if (!k.ahead_complete) k.read_ahead = std::min(2 * ReadAhead(k), kMaxReadAhead);
  return PromoteAhead(it, turn);
}

Status Core::NextHead(Keys::iterator it, Timestamp turn) {
  const KeyState& k = it->second;
  if (k.ahead.empty() && !k.ahead_complete) return RefetchHead(it, turn);
  return PromoteAhead(it, turn);
}

Status Core::PromoteAhead(Keys::iterator it, Timestamp turn) {
  Withdraw(it);
  KeyState& k = it->second;
  k.head.reset();
  if (!k.ahead.empty()) {
    k.head = k.ahead.back();
    k.ahead.pop_back();
  }
  Offer(it, turn);
  MaybeForget(it);
  return {};
}

void Core::AddAhead(KeyState& k, const Window::Key& at) {
  auto& ahead = k.ahead;  // farthest first
  const bool inside = !ahead.empty() && at < ahead.front();
  if (!inside && !k.ahead_complete) return;  // beyond what is known
  auto pos =
      std::find_if(ahead.begin(), ahead.end(), [&](const Window::Key& a) { return !(at < a); });
  if (pos != ahead.end() && *pos == at) return;  // known already (a refill)
  ahead.insert(pos, at);
  if (static_cast<int>(ahead.size()) > ReadAhead(k)) {
    ahead.erase(ahead.begin());
    k.ahead_complete = false;
  }
}

void Core::CursorBefore(const KeyId& id, KeyState* k, const Window::Key& at) {
  const KeyPosition before = Before(at);
  // An unset cursor stays unset: reads then start from the saved one, which
  // the store moved back itself when it wrote the task.
  if (k != nullptr && k->cursor && before < *k->cursor) k->cursor = before;
  if (auto save = cursor_saves_.find(id); save != cursor_saves_.end()) {
    save->second = std::min(save->second, before);
  }
}

void Core::QueueCursorSave(Keys::iterator it, const KeyPosition& at) {
  auto [save, fresh] = cursor_saves_.try_emplace(it->first, at);
  if (!fresh) save->second = std::max(save->second, at);
  it->second.takes_unsaved = 0;
}

Status Core::FlushKeyCursors() {
  for (const auto& [id, at] : cursor_saves_) {
    CHRONOQ_RETURN_IF_ERROR(store_.SaveKeyCursor(id.first, id.second, at));
  }
  cursor_saves_.clear();
  return {};
}

void Core::MaybeForget(Keys::iterator it) {
  const KeyState& k = it->second;
  if (k.in_flight > 0 || (k.head && Loaded(k.head->due))) return;
  // Its head (if any) lies beyond what is loaded: a refill finds it again.
  if (k.takes_unsaved > 0 && k.cursor) QueueCursorSave(it, *k.cursor);
  Withdraw(it);
  keys_.erase(it);
}

Status Core::KeyedArrived(int64_t qid, const std::string& key, const Window::Key& at) {
  auto it = keys_.find({qid, key});
  CursorBefore(KeyId(qid, key), it == keys_.end() ? nullptr : &it->second, at);
  if (it != keys_.end()) {
    KeyState& k = it->second;
    if (k.head && at == *k.head) return {};  // known already (a refill)
    if (k.head && *k.head < at) {
      AddAhead(k, at);
      return {};
    }
    // The new head; the old one is next.
    Withdraw(it);
    if (k.head) {
      k.ahead.push_back(*k.head);
      if (static_cast<int>(k.ahead.size()) > ReadAhead(k)) {
        k.ahead.erase(k.ahead.begin());
        k.ahead_complete = false;
      }
    }
    k.head = at;
    Offer(it, Timestamp::min());
    return {};
  }
  if (at.due < window_.horizon()) {
    // Nothing of the key was loaded, so nothing of it is due before the
    // horizon but this task: it is the head.
    it = keys_.try_emplace({qid, key}).first;
    it->second.head = at;
    it->second.cursor = Before(at);
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
  if (it == keys_.end() || !it->second.head) return {};
  KeyState& k = it->second;
  if (k.head->seq == seq) return NextHead(it, Timestamp::min());
  auto gone = std::find_if(k.ahead.begin(), k.ahead.end(),
                           [&](const Window::Key& a) { return a.seq == seq; });
  if (gone != k.ahead.end()) k.ahead.erase(gone);  // the rest are still the next ones
  return {};
}

Result<std::optional<Core::Keys::iterator>> Core::TakeHead(
    const Window::Key& entry, Timestamp now, std::vector<Keys::iterator>* read_later) {
  auto h = queued_heads_.find(entry.seq);
  if (h == queued_heads_.end()) return std::optional<Keys::iterator>();
  const Keys::iterator it = h->second;
  queued_heads_.erase(h);
  KeyState& k = it->second;
  // The claim popped its window entry already.
  k.queued.reset();
  ++k.in_flight;
  NotePending(it->first.first, it->first.second, -1);
  // The cursor as it was lies before every task waiting to start, whether
  // or not this claim's statement succeeds: that is the one to save.
  if (++k.takes_unsaved >= kCursorSaveEvery && k.cursor) QueueCursorSave(it, *k.cursor);
  const std::optional<KeyPosition> cursor = k.cursor;
  const Window::Key taken = *k.head;
  // The taken head is still scheduled in the store until the claim's
  // statement runs: the next head is the first after it. in_flight > 0, so
  // the key stays.
  k.cursor = PositionOf(taken);
  // A full key's next head cannot join this claim: when it must be read,
  // the claim reads it with the other keys' (RefetchHeads), in one round
  // trip on PostgreSQL. Meanwhile the key's head is the taken one, out of
  // the window.
  if (read_later != nullptr && k.ahead.empty() && !k.ahead_complete &&
      k.in_flight >= KeyLimit(it->first.first)) {
    read_later->push_back(it);
    return std::optional<Keys::iterator>(it);
  }
  if (Status s = NextHead(it, now); !s.ok()) {
    // The store failed before the head changed: the key is as it was.
    --k.in_flight;
    NotePending(it->first.first, it->first.second, 1);
    k.cursor = cursor;
    k.head = taken;
    Offer(it, Timestamp::min());
    return s;
  }
  return std::optional<Keys::iterator>(it);
}

Status Core::UntakeHeads(const std::vector<Keys::iterator>& taken) {
  // The heads are still scheduled: give their places back, then read each
  // key's head again (once per key: it may be forgotten), from the saved
  // cursor, which lies before them.
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
            std::string(field), StatusReason::kKeyBacklogFull};
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
