#pragma once
// The engine over a model fixture, the same tests for every backend: each test binary defines
// make_engine_decoder() for its backend and instantiates EngineTest with its fixtures.

#include <memory>
#include <string>

#include "model/decoder.h"
#include "model/loaded_model.h"

namespace evt::engine::testing {

// A decoder of the binary's backend with a cache of `pages` pages of 16 positions.
Expected<std::unique_ptr<model::Decoder>> make_engine_decoder(std::shared_ptr<const model::LoadedModel> model,
                                                              int64_t pages);

}  // namespace evt::engine::testing
