#include "tokenizer/bpe_model.h"

#include <queue>

namespace evt::tokenizer {

Expected<BpeModel> BpeModel::build(std::unordered_map<std::string, int32_t> id_by_bytes, const std::vector<Merge>& merges,
                                   bool ignore_merges) {
  BpeModel model;
  // Every byte must be a token, or some inputs would have no encoding (there is no unk fallback).
  for (int b = 0; b < 256; ++b) {
    auto it = id_by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == id_by_bytes.end()) return error("model.vocab has no token for byte 0x{:02X}", b);
    model.byte_ids_[b] = it->second;
  }
  std::vector<const std::string*> bytes_by_id;
  for (const auto& [bytes, id] : id_by_bytes) {
    if (static_cast<std::size_t>(id) >= bytes_by_id.size()) bytes_by_id.resize(id + 1);
    bytes_by_id[id] = &bytes;
  }
  model.merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merges[rank];
    auto merged = id_by_bytes.find(*bytes_by_id[left] + *bytes_by_id[right]);
    if (merged == id_by_bytes.end()) return error("model.merges[{}]: the merged token is not in model.vocab", rank);
    // A repeated pair keeps its last rank, as in Hugging Face.
    model.merges_[pair_key(left, right)] = {static_cast<int32_t>(rank), merged->second};
  }
  model.id_by_bytes_ = std::move(id_by_bytes);
  model.ignore_merges_ = ignore_merges;
  return model;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    // Llama 3 style: a word that is itself a token is that token, whatever the merges would do.
    if (auto it = id_by_bytes_.find(std::string(word)); it != id_by_bytes_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (auto it = cache_->ids_by_word.find(std::string(word)); it != cache_->ids_by_word.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = ids.size();
  merge_word(word, ids);
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (cache_->ids_by_word.size() >= WordCache::kMaxEntries) cache_->ids_by_word.clear();
    cache_->ids_by_word.emplace(word, std::vector<int32_t>(ids.begin() + first, ids.end()));
  }
}

// Hugging Face's Word::merge_all: symbols form a linked list; a heap holds candidate merges by
// (rank, position); an entry whose pair has changed since it was pushed is stale and skipped.
void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the ends
    bool removed;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = {byte_ids_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, false};

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.new_id) continue;
    left.id = top.new_id;
    right.removed = true;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace evt::tokenizer
