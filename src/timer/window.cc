#include "timer/window.h"

namespace chronoq {

void Window::Add(int64_t qid, const Key& key) {
  if (queues_[qid].insert(key).second) ++size_;
}

bool Window::Remove(int64_t qid, const Key& key) {
  auto it = queues_.find(qid);
  if (it == queues_.end() || it->second.erase(key) == 0) return false;
  --size_;
  return true;
}

std::optional<Window::Key> Window::PopDue(int64_t qid, Timestamp now) {
  auto it = queues_.find(qid);
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  auto first = it->second.begin();
  if (first->due > now) return std::nullopt;
  Key key = *first;
  it->second.erase(first);
  --size_;
  return key;
}

std::optional<Timestamp> Window::EarliestDue(int64_t qid) const {
  auto it = queues_.find(qid);
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  return it->second.begin()->due;
}

size_t Window::CountDue(int64_t qid, Timestamp now) const {
  auto it = queues_.find(qid);
  if (it == queues_.end() || it->second.empty()) return 0;
  const Keys& keys = it->second;
  if (keys.rbegin()->due <= now) return keys.size();
  size_t n = 0;
  for (auto k = keys.begin(); k != keys.end() && k->due <= now; ++k) ++n;
  return n;
}

void Window::Clear() {
  queues_.clear();
  size_ = 0;
  horizon_ = Timestamp::min();
}

}  // namespace chronoq
