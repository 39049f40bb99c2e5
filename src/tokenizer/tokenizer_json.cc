#include "tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <limits>

namespace evt::tokenizer {
namespace {

using nlohmann::json;

std::string type_of(const json& node) { return node.is_object() && node.contains("type") ? node["type"].dump() : "?"; }

const json* find(const json& node, const char* key) {
  if (!node.is_object()) return nullptr;
  auto it = node.find(key);
  return it == node.end() ? nullptr : &*it;
}

// The member, or null when absent (without copying it, unlike json::value).
const json& member_or_null(const json& node, const char* key) {
  static const json kNull;
  const json* value = find(node, key);
  return value ? *value : kNull;
}

bool flag(const json& node, const char* key) {
  const json* value = find(node, key);
  return value && value->is_boolean() && value->get<bool>();
}

// Fields whose only supported value is null/absent, false, or an empty string.
Status require_unset(const json& node, const std::string& path, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    const json* value = find(node, key);
    if (!value || value->is_null() || (value->is_boolean() && !value->get<bool>()) ||
        (value->is_string() && value->get<std::string>().empty())) {
      continue;
    }
    return error("{}.{} {} is not supported", path, key, value->dump());
  }
  return {};
}

bool is_token_id(const json& value) {
  return value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= std::numeric_limits<int32_t>::max();
}

Expected<int32_t> read_id(const json& value, const std::string& path) {
  if (!is_token_id(value)) return error("{} is not a valid token id: {}", path, value.dump());
  return value.get<int32_t>();
}

Status read_model(const json& model, TokenizerJson& out) {
  if (!model.is_object()) return error("model is missing");
  if (type_of(model) != "\"BPE\"") return error("model.type {} is not supported (only byte-level BPE)", type_of(model));
  EVT_RETURN_IF_ERROR(require_unset(model, "model", {"dropout", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"}));
  out.ignore_merges = flag(model, "ignore_merges");
  const json* vocab = find(model, "vocab");
  if (!vocab || !vocab->is_object()) return error("model.vocab is missing or not an object");
  out.vocab.reserve(vocab->size());
  for (const auto& [name, id] : vocab->items()) {
    if (!is_token_id(id)) return error("model.vocab[{}] is not a valid token id: {}", json(name).dump(), id.dump());
    out.vocab.emplace_back(name, id.get<int32_t>());
  }
  const json* merges = find(model, "merges");
  if (!merges || !merges->is_array()) return error("model.merges is missing or not an array");
  out.merges.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const json& merge = (*merges)[i];
    // Two spellings: "left right" (tokenizers < 0.20) and ["left", "right"].
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ');
      if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos) {
        out.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
        continue;
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      out.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    return error("model.merges[{}] is neither \"left right\" nor [left, right]: {}", i, merge.dump());
  }
  return {};
}

Status read_normalizer(const json& node, const std::string& path, TokenizerJson& out) {
  if (node.is_null()) return {};
  if (type_of(node) == "\"NFC\"") {
    out.nfc = true;
    return {};
  }
  if (type_of(node) == "\"Sequence\"" && find(node, "normalizers") && node["normalizers"].is_array()) {
    for (std::size_t i = 0; i < node["normalizers"].size(); ++i) {
      EVT_RETURN_IF_ERROR(read_normalizer(node["normalizers"][i], fmt::format("{}.normalizers[{}]", path, i), out));
    }
    return {};
  }
  return error("{}.type {} is not supported (only NFC)", path, type_of(node));
}

Status read_pre_tokenizer(const json& node, const std::string& path, TokenizerJson& out, bool& byte_level) {
  const std::string type = type_of(node);
  if (type == "\"Sequence\"" && find(node, "pretokenizers") && node["pretokenizers"].is_array()) {
    for (std::size_t i = 0; i < node["pretokenizers"].size(); ++i) {
      EVT_RETURN_IF_ERROR(read_pre_tokenizer(node["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", path, i), out, byte_level));
    }
    return {};
  }
  if (type == "\"ByteLevel\"") {
    // use_regex would split with GPT-2's built-in pattern; Qwen and Llama 3 split with their own.
    EVT_RETURN_IF_ERROR(require_unset(node, path, {"add_prefix_space", "use_regex"}));
    byte_level = true;
    return {};
  }
  if (type == "\"Split\"") {
    const json* behavior = find(node, "behavior");
    if (!behavior || *behavior != "Isolated") {
      return error("{}.behavior {} is not supported (only \"Isolated\")", path, behavior ? behavior->dump() : "null");
    }
    EVT_RETURN_IF_ERROR(require_unset(node, path, {"invert"}));
    const json* pattern = find(node, "pattern");
    for (const char* kind : {"Regex", "String"}) {
      if (pattern && find(*pattern, kind) && (*pattern)[kind].is_string()) {
        out.splits.push_back({(*pattern)[kind].get<std::string>(), kind == std::string("String"), path + ".pattern"});
        return {};
      }
    }
    return error("{}.pattern is neither {{\"Regex\": ...}} nor {{\"String\": ...}}", path);
  }
  return error("{}.type {} is not supported (only Sequence, Split and ByteLevel)", path, type);
}

Status read_added_tokens(const json& node, TokenizerJson& out) {
  if (node.is_null()) return {};
  if (!node.is_array()) return error("added_tokens is not an array");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string path = fmt::format("added_tokens[{}]", i);
    const json* content = find(node[i], "content");
    const json* id = find(node[i], "id");
    if (!content || !content->is_string() || content->get<std::string>().empty() || !id) {
      return error("{} needs a non-empty \"content\" and an \"id\"", path);
    }
    EVT_ASSIGN_OR_RETURN(int32_t value, read_id(*id, path + ".id"));
    out.added_tokens.push_back({.id = value,
                                .content = content->get<std::string>(),
                                .special = flag(node[i], "special"),
                                .lstrip = flag(node[i], "lstrip"),
                                .rstrip = flag(node[i], "rstrip"),
                                .single_word = flag(node[i], "single_word"),
                                .normalized = flag(node[i], "normalized")});
  }
  return {};
}

// TemplateProcessing's "single" template: special tokens around the sequence "$A".
Status read_template(const json& node, const std::string& path, TokenizerJson& out) {
  const json* single = find(node, "single");
  const json* special_tokens = find(node, "special_tokens");
  if (!single || !single->is_array() || !special_tokens) return error("{} needs \"single\" and \"special_tokens\"", path);
  bool after_sequence = false;
  for (std::size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    if (find(item, "Sequence")) {
      after_sequence = true;
      continue;
    }
    const json* special = find(item, "SpecialToken");
    const json* name = special ? find(*special, "id") : nullptr;
    const json* entry = name && name->is_string() ? find(*special_tokens, name->get<std::string>().c_str()) : nullptr;
    const json* ids = entry ? find(*entry, "ids") : nullptr;
    if (!ids || !ids->is_array()) return error("{}.single[{}] names no entry of {}.special_tokens", path, i, path);
    for (const json& id : *ids) {
      EVT_ASSIGN_OR_RETURN(int32_t value, read_id(id, fmt::format("{}.special_tokens[{}].ids", path, name->dump())));
      (after_sequence ? out.suffix_ids : out.prefix_ids).push_back(value);
    }
  }
  return {};
}

Status read_post_processor(const json& node, const std::string& path, TokenizerJson& out) {
  const std::string type = type_of(node);
  if (node.is_null() || type == "\"ByteLevel\"") return {};  // ByteLevel only adjusts offsets
  if (type == "\"TemplateProcessing\"") return read_template(node, path, out);
  if (type == "\"Sequence\"" && find(node, "processors") && node["processors"].is_array()) {
    for (std::size_t i = 0; i < node["processors"].size(); ++i) {
      EVT_RETURN_IF_ERROR(read_post_processor(node["processors"][i], fmt::format("{}.processors[{}]", path, i), out));
    }
    return {};
  }
  return error("{}.type {} is not supported (only ByteLevel and TemplateProcessing)", path, type);
}

Status read_document(const json& doc, TokenizerJson& out) {
  if (!doc.is_object()) return error("not a tokenizer.json object");
  EVT_RETURN_IF_ERROR(read_model(member_or_null(doc, "model"), out));
  EVT_RETURN_IF_ERROR(read_normalizer(member_or_null(doc, "normalizer"), "normalizer", out));
  bool byte_level = false;
  const json& pre_tokenizer = member_or_null(doc, "pre_tokenizer");
  if (!pre_tokenizer.is_null()) EVT_RETURN_IF_ERROR(read_pre_tokenizer(pre_tokenizer, "pre_tokenizer", out, byte_level));
  if (!byte_level) return error("pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
  const json& decoder = member_or_null(doc, "decoder");
  if (type_of(decoder) != "\"ByteLevel\"") return error("decoder.type {} is not supported (only ByteLevel)", type_of(decoder));
  EVT_RETURN_IF_ERROR(read_added_tokens(member_or_null(doc, "added_tokens"), out));
  return read_post_processor(member_or_null(doc, "post_processor"), "post_processor", out);
}

}  // namespace

Expected<TokenizerJson> read_tokenizer_json(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return error("{}: cannot open", path.string());
  // Parsing from memory is several times faster than from the stream (Qwen's file is 5 MB).
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return error("{}: not valid JSON: {}", path.string(), e.what());
  }
  TokenizerJson out;
  EVT_RETURN_IF_ERROR(read_document(doc, out).with_context(path.string()));
  return out;
}

}  // namespace evt::tokenizer
