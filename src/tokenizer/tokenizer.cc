#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace evt::tokenizer {
namespace {

// Quoted as JSON would, so that names with spaces or control characters read unambiguously.
std::string quote_name(std::string_view name) { return fmt::format("\"{}\"", name); }

}  // namespace

Expected<Tokenizer> Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  EVT_ASSIGN_OR_RETURN(TokenizerJson json, read_tokenizer_json(tokenizer_json));
  const std::string file = tokenizer_json.string();

  int32_t max_id = -1;
  for (const auto& [name, id] : json.vocab) max_id = std::max(max_id, id);
  for (const AddedToken& token : json.added_tokens) max_id = std::max(max_id, token.id);
  // Tables are indexed by id; a stray huge id must be an error, not a gigabyte allocation.
  const std::size_t token_count = json.vocab.size() + json.added_tokens.size();
  if (static_cast<std::size_t>(max_id) >= 2 * token_count + 1024) {
    return error("{}: token id {} is far beyond the {} tokens the file has", file, max_id, token_count);
  }
  std::vector<std::string> names(max_id + 1);
  std::vector<std::string> bytes(max_id + 1);
  std::unordered_map<std::string, int32_t> id_by_name;
  std::unordered_map<std::string, int32_t> id_by_bytes;
  id_by_name.reserve(json.vocab.size() + json.added_tokens.size());
  id_by_bytes.reserve(json.vocab.size());
  for (auto& [name, id] : json.vocab) {
    std::optional<std::string> token_bytes = byte_level_to_bytes(name);
    if (!token_bytes) return error("{}: model.vocab[{}] is not a byte-level token name", file, quote_name(name));
    if (!names[id].empty()) return error("{}: model.vocab gives id {} to both {} and {}", file, id, quote_name(names[id]), quote_name(name));
    if (!id_by_bytes.emplace(*token_bytes, id).second) {
      return error("{}: model.vocab has two names for the bytes of {}", file, quote_name(name));
    }
    bytes[id] = *std::move(token_bytes);
    id_by_name.emplace(name, id);
    names[id] = std::move(name);
  }

  std::vector<BpeModel::Merge> merges;
  merges.reserve(json.merges.size());
  for (std::size_t rank = 0; rank < json.merges.size(); ++rank) {
    const auto& [left, right] = json.merges[rank];
    auto left_id = id_by_name.find(left);
    auto right_id = id_by_name.find(right);
    if (left_id == id_by_name.end() || right_id == id_by_name.end()) {
      return error("{}: model.merges[{}]: {} is not in model.vocab", file, rank,
                   quote_name(left_id == id_by_name.end() ? left : right));
    }
    merges.push_back({left_id->second, right_id->second});
  }
  auto bpe = BpeModel::build(std::move(id_by_bytes), merges, json.ignore_merges);
  if (!bpe.ok()) return bpe.status().with_context(file);

  std::optional<NfcNormalizer> nfc;
  if (json.nfc) {
    auto created = NfcNormalizer::create();
    if (!created.ok()) return created.status().with_context(file + ": normalizer");
    nfc = *created;
  }
  Tokenizer tokenizer(std::move(*bpe), nfc);
  for (const SplitPattern& split : json.splits) {
    auto splitter = RegexSplitter::compile(split.pattern, split.literal);
    if (!splitter.ok()) return splitter.status().with_context(file + ": " + split.json_path);
    tokenizer.splits_.push_back(std::move(*splitter));
  }

  std::vector<bool> special(max_id + 1, false);
  std::vector<AddedToken> raw_added;
  std::vector<AddedToken> normalized_added;
  for (AddedToken& token : json.added_tokens) {
    // An added token overrides a model token with its id, as in Hugging Face.
    names[token.id] = token.content;
    bytes[token.id] = decoded_bytes(token.content);
    special[token.id] = token.special;
    id_by_name[token.content] = token.id;
    if (token.normalized && nfc) token.content = nfc->normalize(token.content);
    (token.normalized ? normalized_added : raw_added).push_back(std::move(token));
  }
  tokenizer.raw_added_ = AddedTokenMatcher(std::move(raw_added));
  tokenizer.normalized_added_ = AddedTokenMatcher(std::move(normalized_added));
  tokenizer.names_ = std::move(names);
  tokenizer.bytes_ = std::move(bytes);
  tokenizer.special_ = std::move(special);
  tokenizer.id_by_name_ = std::move(id_by_name);
  for (int32_t id : json.prefix_ids) EVT_RETURN_IF_ERROR(tokenizer.check_id(id).with_context(file + ": post_processor"));
  for (int32_t id : json.suffix_ids) EVT_RETURN_IF_ERROR(tokenizer.check_id(id).with_context(file + ": post_processor"));
  tokenizer.prefix_ids_ = std::move(json.prefix_ids);
  tokenizer.suffix_ids_ = std::move(json.suffix_ids);
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size());
  if (add_special_tokens) ids = prefix_ids_;
  for_each_utf8_run(text, [&](std::string_view run, bool valid) {
    if (valid) {
      encode_valid(run, ids);
    } else {
      bpe_.encode_word(run, ids);
    }
  });
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

void Tokenizer::encode_valid(std::string_view text, std::vector<int32_t>& ids) const {
  for (const AddedTokenMatcher::Piece& piece : raw_added_.split(text)) {
    if (piece.id) {
      ids.push_back(*piece.id);
    } else if (nfc_) {
      encode_normalized(nfc_->normalize(piece.text), ids);
    } else {
      encode_normalized(piece.text, ids);
    }
  }
}

void Tokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& ids) const {
  for (const AddedTokenMatcher::Piece& piece : normalized_added_.split(text)) {
    if (piece.id) {
      ids.push_back(*piece.id);
    } else {
      pre_tokenize(piece.text, 0, ids);
    }
  }
}

void Tokenizer::pre_tokenize(std::string_view text, std::size_t split, std::vector<int32_t>& ids) const {
  if (split == splits_.size()) {
    if (!text.empty()) bpe_.encode_word(text, ids);
    return;
  }
  for (std::string_view piece : splits_[split].split(text)) pre_tokenize(piece, split + 1, ids);
}

Status Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size() || names_[id].empty()) {
    return error("token id {} is not in the vocabulary (ids 0..{})", id, vocab_size() - 1);
  }
  return {};
}

Expected<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string joined;
  for (int32_t id : ids) {
    EVT_RETURN_IF_ERROR(check_id(id));
    if (!(skip_special && special_[id])) joined += bytes_[id];
  }
  std::string text;
  append_lossy_utf8(text, joined);
  return text;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view name) const {
  auto it = id_by_name_.find(std::string(name));
  return it == id_by_name_.end() ? std::nullopt : std::optional(it->second);
}

std::optional<std::string_view> Tokenizer::token_name(int32_t id) const {
  if (!check_id(id).ok()) return std::nullopt;
  return names_[id];
}

std::optional<std::string_view> Tokenizer::token_bytes(int32_t id) const {
  if (!check_id(id).ok()) return std::nullopt;
  return bytes_[id];
}

bool Tokenizer::is_special(int32_t id) const { return check_id(id).ok() && special_[id]; }

}  // namespace evt::tokenizer
