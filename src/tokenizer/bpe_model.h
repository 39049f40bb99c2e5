#pragma once
// The BPE model of a byte-level tokenizer.json, over raw bytes: a word (one pre-token) starts as
// its bytes and adjacent pairs merge in rank order, the lowest rank first and the leftmost among
// equals, exactly as Hugging Face's BPE does. Results are cached per word.

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace evt::tokenizer {

class BpeModel {
 public:
  struct Merge {
    int32_t left = 0;
    int32_t right = 0;
  };

  // `id_by_bytes` holds every model token; `merges` in rank order (index = rank). Errors are
  // phrased for the tokenizer.json path "model".
  static Expected<BpeModel> build(std::unordered_map<std::string, int32_t> id_by_bytes, const std::vector<Merge>& merges,
                                  bool ignore_merges);

  // Appends the ids of one word (non-empty bytes). Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;

 private:
  struct MergeResult {
    int32_t rank = 0;
    int32_t id = 0;
  };
  // Bounded so that a server that sees endless distinct words keeps constant memory; cleared
  // whole when full, which is cheap and keeps the words of the current traffic.
  struct WordCache {
    static constexpr std::size_t kMaxEntries = 1 << 16;
    static constexpr std::size_t kMaxWordBytes = 256;
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> ids_by_word;
  };

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t> id_by_bytes_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, MergeResult> merges_;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();
};

}  // namespace evt::tokenizer
