#pragma once
// The Hugging Face answers committed with a model fixture (tests/fixtures/README.md): prompts,
// greedy continuations, the first steps' logits and the tolerance.

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "support/source_dir.h"
#include "util/check.h"

namespace evt::model::testing {

struct FixturePrompt {
  std::vector<int32_t> tokens, greedy;
  std::vector<std::vector<float>> logits;  // logit_steps rows of vocab floats
};

struct FixtureReference {
  std::filesystem::path dir;
  std::vector<FixturePrompt> prompts;
  double logits_tolerance = 0;
  double min_margin = 0;
};

inline std::filesystem::path fixture_dir(const std::string& name) {
  return std::filesystem::path(evt::testing::source_dir()) / "tests" / "fixtures" / name;
}

inline FixtureReference load_fixture_reference(const std::string& name) {
  FixtureReference ref;
  ref.dir = fixture_dir(name);
  std::ifstream in(ref.dir / "reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  ref.logits_tolerance = j["tolerance"]["logits_max_abs_diff"].get<double>();
  ref.min_margin = j["min_margin"].get<double>();
  auto logits = SafetensorsFile::open(ref.dir / j["logits_file"].get<std::string>());
  EVT_CHECK(logits.ok()) << logits.status().message();
  for (const auto& p : j["prompts"]) {
    FixturePrompt fp;
    fp.tokens = p["tokens"].get<std::vector<int32_t>>();
    fp.greedy = p["greedy"].get<std::vector<int32_t>>();
    const TensorRef* t = logits->find(p["logits"].get<std::string>());
    EVT_CHECK(t != nullptr && t->dtype == DType::kF32 && t->shape.size() == 2);
    for (int64_t r = 0; r < t->shape[0]; ++r) {
      std::vector<float> row(static_cast<size_t>(t->shape[1]));
      std::memcpy(row.data(), t->data + r * t->shape[1] * 4, row.size() * 4);
      fp.logits.push_back(std::move(row));
    }
    ref.prompts.push_back(std::move(fp));
  }
  return ref;
}

}  // namespace evt::model::testing
