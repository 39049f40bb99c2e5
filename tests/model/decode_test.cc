// The fixture tests of every backend (decode_fixture_test.h).

#include "model/decode_fixture_test.h"

namespace evt::model::testing {
namespace {

TEST_P(FixtureDecode, EachPromptAloneMatchesHuggingFace) {
  for (size_t i = 0; i < ref_.prompts.size(); ++i) {
    auto r = generate(*decoder_, {ref_.prompts[i].tokens}, options());
    ASSERT_TRUE(r.ok()) << r.status().message();
    expect_matches(*r, {i});
  }
}

TEST_P(FixtureDecode, MixedLengthBatchMatchesHuggingFace) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<size_t> order;
  // Longest first, so the batch's rows do not follow the prompts' order.
  for (size_t i = ref_.prompts.size(); i-- > 0;) {
    prompts.push_back(ref_.prompts[i].tokens);
    order.push_back(i);
  }
  auto r = generate(*decoder_, prompts, options());
  ASSERT_TRUE(r.ok()) << r.status().message();
  expect_matches(*r, order);
}

}  // namespace
}  // namespace evt::model::testing
