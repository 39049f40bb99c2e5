// The tuning table (model/tuning_table.h): which entry a step takes, what it changes, and the
// JSON file's round trip and errors.

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/tuning_table.h"

namespace evt::model {
namespace {

TuningTable table_of(std::vector<TunedTiling> entries) {
  TuningTable t;
  t.shapes = "layers 2";
  t.device = "test";
  t.exec = "megakernel";
  t.entries = std::move(entries);
  return t;
}

TEST(TuningTable, AStepTakesTheNearestEntryAtOrAboveItsTokensThenItsContext) {
  const TuningTable t = table_of({{1, 513, 4, 16, 0, 0},
                                  {1, 4097, 4, 32, 0, 0},
                                  {16, 513, 2, 8, 0, 0},
                                  {64, 513, 1, 1, 0, 0}});
  const auto splits = [&](int64_t tokens, int64_t context) {
    const TunedTiling* e = t.find(tokens, context);
    return e == nullptr ? std::pair<int64_t, int64_t>{-1, -1} : std::pair{e->qkv_splits, e->kv_splits};
  };
  EXPECT_EQ(splits(1, 513), (std::pair<int64_t, int64_t>{4, 16}));
  EXPECT_EQ(splits(1, 600), (std::pair<int64_t, int64_t>{4, 32}));   // the next context up
  EXPECT_EQ(splits(1, 9000), (std::pair<int64_t, int64_t>{4, 32}));  // past every context: the longest
  EXPECT_EQ(splits(2, 100), (std::pair<int64_t, int64_t>{2, 8}));    // the next batch up
  EXPECT_EQ(splits(16, 4097), (std::pair<int64_t, int64_t>{2, 8}));  // its batch's only context
  EXPECT_EQ(splits(200, 513), (std::pair<int64_t, int64_t>{1, 1}));  // past every batch: the largest
  EXPECT_EQ(table_of({}).find(1, 1), nullptr);
}

TEST(TuningTable, TunedTilingTakesTheEntrysSplitsAndKeepsTheRest) {
  Tiling base;
  base.rows_h = 48;
  base.qkv_splits = 3;
  base.kv_split_len = 64;
  const TuningTable t = table_of({{4, 1000, 8, 6, 0, 0}});
  const Tiling tuned = tuned_tiling(base, &t, 4, 1000);
  EXPECT_EQ(tuned.qkv_splits, 8);
  EXPECT_EQ(tuned.kv_split_len, 167);  // ceil(1000 / 6)
  EXPECT_EQ(tuned.rows_h, 48);
  EXPECT_EQ(tuned_tiling(base, nullptr, 4, 1000).qkv_splits, 3);
  EXPECT_EQ(tuned_tiling(base, &t, 4, 3).kv_split_len, 1);  // more splits than positions
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("eventide_tuning_" + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(TuningTable, SavesAndLoadsEveryField) {
  const TuningTable t = table_of({{1, 513, 4, 16, 7.5, 8.25}, {64, 513, 1, 2, 40, 41}});
  const std::string path = temp_path("round_trip.json");
  ASSERT_TRUE(save_tuning_table(path, t).ok());
  auto loaded = load_tuning_table(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->shapes, t.shapes);
  EXPECT_EQ(loaded->device, t.device);
  EXPECT_EQ(loaded->exec, t.exec);
  ASSERT_EQ(loaded->entries.size(), 2u);
  EXPECT_EQ(loaded->entries[1].tokens, 64);
  EXPECT_EQ(loaded->entries[1].kv_splits, 2);
  EXPECT_EQ(loaded->entries[0].default_ms, 8.25);
}

TEST(TuningTable, BadFilesAreRefusedNamingTheFileAndTheEntry) {
  const std::string head = R"({"shapes": "layers 2", "device": "d", "exec": "megakernel", "entries": )";
  const std::string good = R"({"tokens": 1, "context": 9, "qkv_splits": 1, "kv_splits": 1})";
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not a JSON object"},
           {R"({"device": "d", "exec": "e", "entries": []})", "\"shapes\" must be a string"},
           {head + "{}}", "\"entries\" must be an array"},
           {head + R"([{"tokens": 0, "context": 9, "qkv_splits": 1, "kv_splits": 1}]})",
            "entry 0: \"tokens\" must be an integer of at least 1"},
           {head + "[" + good + R"(, {"tokens": 1, "context": 9, "qkv_splits": 1}]})",
            "entry 1: \"kv_splits\" must be an integer of at least 1"},
           {head + "[" + good + ", " + good + "]}", "entry 1: a second entry for 1 tokens at context 9"},
       }) {
    const std::string path = temp_path("bad.json");
    std::ofstream(path) << text;
    const auto loaded = load_tuning_table(path);
    ASSERT_FALSE(loaded.ok()) << text;
    EXPECT_NE(loaded.status().message().find(path), std::string::npos) << loaded.status().message();
    EXPECT_NE(loaded.status().message().find(message), std::string::npos) << loaded.status().message();
  }
  EXPECT_FALSE(load_tuning_table(temp_path("missing.json")).ok());
}

}  // namespace
}  // namespace evt::model
