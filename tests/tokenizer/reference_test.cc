// Compares with the Hugging Face `tokenizers` package through the reference files that
// scripts/tokenizer_reference.py writes (CI checks they still match the pinned package): the
// same ids for a mixed corpus and thousands of fuzzed strings, the same decoded text, and a
// streaming decode that adds up to the same text.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace evt::tokenizer {
namespace {

using nlohmann::json;

struct Fixture {
  Tokenizer tokenizer;
  json reference;
};

const Fixture& fixture(const std::string& name) {
  static std::map<std::string, Fixture> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  std::ifstream file(std::string(EVT_SOURCE_DIR) + "/tests/tokenizer/data/" + name + "_reference.json");
  EVT_CHECK(file) << "missing reference file for " << name;
  json reference = json::parse(file);
  auto tokenizer = Tokenizer::load(std::string(EVT_SOURCE_DIR) + "/" + reference["tokenizer"].get<std::string>());
  EVT_CHECK(tokenizer.ok()) << tokenizer.status().message();
  return loaded.emplace(name, Fixture{std::move(*tokenizer), std::move(reference)}).first->second;
}

std::vector<int32_t> ids_of(const json& value) { return value.get<std::vector<int32_t>>(); }

std::string streamed(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDecoder decoder(tokenizer, skip_special);
  std::string text;
  for (int32_t id : ids) {
    auto piece = decoder.push(id);
    EVT_CHECK(piece.ok()) << piece.status().message();
    text += *piece;
  }
  return text + decoder.flush();
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, EncodesLikeHuggingFace) {
  const auto& [tokenizer, reference] = fixture(GetParam());
  EXPECT_EQ(tokenizer.vocab_size(), reference["vocab_size"].get<int32_t>());
  int failures = 0;
  for (const json& c : reference["cases"]) {
    const std::string text = c["text"];
    const std::vector<int32_t> expected = ids_of(c["ids"]);
    const std::vector<int32_t> expected_special = c.contains("ids_with_special") ? ids_of(c["ids_with_special"]) : expected;
    if (tokenizer.encode(text) != expected || tokenizer.encode(text, true) != expected_special) {
      ADD_FAILURE() << "encode differs from Hugging Face on " << json(text).dump() << ": expected " << c["ids"].dump()
                    << ", got " << json(tokenizer.encode(text)).dump();
      if (++failures == 10) break;
    }
  }
  EXPECT_GE(reference["cases"].size(), 500u);
  // The bar for the real tokenizer: at least 10,000 fuzzed strings besides the corpus.
  if (GetParam() == "qwen3") {
    EXPECT_GT(reference["cases"].size(), 10000u);
  }
}

TEST_P(ReferenceTest, DecodesLikeHuggingFace) {
  const auto& [tokenizer, reference] = fixture(GetParam());
  auto check = [&](const json& c, const std::string& decoded, const std::string& skipped) {
    const std::vector<int32_t> ids = ids_of(c["ids"]);
    for (bool skip : {false, true}) {
      const std::string& expected = skip ? skipped : decoded;
      auto text = tokenizer.decode(ids, skip);
      ASSERT_TRUE(text.ok()) << text.status().message();
      EXPECT_EQ(*text, expected) << "decode(" << c["ids"].dump() << ", skip_special=" << skip << ")";
      EXPECT_EQ(streamed(tokenizer, ids, skip), expected) << "streamed " << c["ids"].dump() << ", skip_special=" << skip;
    }
  };
  for (const json& c : reference["cases"]) {
    const std::string decoded = c.value("decoded", c["text"].get<std::string>());
    check(c, decoded, c.value("decoded_skip_special", decoded));
    if (HasFailure()) return;
  }
  // Random ids cut characters apart: the U+FFFD placement must match too.
  for (const json& c : reference["decodes"]) {
    check(c, c["decoded"], c["decoded_skip_special"]);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, ReferenceTest, ::testing::Values("qwen3", "llama3_style", "added_flags"));

}  // namespace
}  // namespace evt::tokenizer
