#pragma once
// The engine over a model fixture, the same tests for every backend: each test binary defines
// the fixtures and exec modes it tests and make_engine_decoder() for its backend.

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/decoder.h"
#include "model/loaded_model.h"

namespace evt::engine::testing {

// The (fixture, exec mode) pairs the binary tests.
using EngineCase = std::tuple<std::string, model::Exec>;
std::vector<EngineCase> engine_test_cases();

// A decoder of the binary's backend with a cache of `pages` pages of 16 positions.
Expected<std::unique_ptr<model::Decoder>> make_engine_decoder(std::shared_ptr<const model::LoadedModel> model,
                                                              model::Exec exec, int64_t pages);

}  // namespace evt::engine::testing
