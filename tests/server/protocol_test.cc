// The OpenAI protocol functions and stop strings, without sockets.

#include <gtest/gtest.h>

#include "server/openai_protocol.h"
#include "server/stop_strings.h"

namespace evt::server {
namespace {

TEST(StopMatcher, CutsAtTheFirstStopAcrossPieces) {
  StopMatcher m({"END", "xy"});
  EXPECT_EQ(m.push("abc E"), "abc ");  // "E" may begin "END"
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("D and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("ignored"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, ReleasesAHeldPrefixThatDoesNotComplete) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("EN"), "");
  EXPECT_EQ(m.push("o"), "ENo");
  EXPECT_EQ(m.push("E"), "");
  EXPECT_EQ(m.flush(), "E");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralWins) {
  StopMatcher m({"cd", "b"});
  EXPECT_EQ(m.push("abcd"), "a");
}

TEST(Protocol, ParsesACompletion) {
  auto r = parse_request(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0,"top_k":-1,
                             "stop":["x","y"],"stream":true,"stream_options":{"include_usage":true},"seed":7})",
                         Endpoint::kCompletions);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  const GenerationRequest& g = std::get<GenerationRequest>(r);
  EXPECT_EQ(std::get<std::string>(g.prompt), "hi");
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(g.sampling.temperature, 0);
  EXPECT_EQ(g.sampling.top_k, 0);
  EXPECT_EQ(g.sampling.seed, 7u);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(g.stream && g.include_usage);
}

TEST(Protocol, ParsesChatAndTokenPrompts) {
  auto chat = parse_request(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                                "max_completion_tokens":3})",
                            Endpoint::kChat);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(chat));
  EXPECT_EQ(std::get<GenerationRequest>(chat).messages[0].content, "ab");
  EXPECT_EQ(std::get<GenerationRequest>(chat).max_tokens, 3);
  auto ids = parse_request(R"({"prompt":[1,2,3]})", Endpoint::kCompletions);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(ids));
  EXPECT_EQ(std::get<std::vector<int32_t>>(std::get<GenerationRequest>(ids).prompt), (std::vector<int32_t>{1, 2, 3}));
}

TEST(Protocol, ErrorsNameTheField) {
  auto r = parse_request(R"({"prompt":"x","top_p":"high"})", Endpoint::kCompletions);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  const nlohmann::json e = error_body(std::get<ApiError>(r));
  EXPECT_EQ(e["error"]["param"], "top_p");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"]["code"].is_null());
  EXPECT_EQ(e["error"]["message"], "'top_p' must be a number, got \"high\"");
}

TEST(Protocol, BuildsResponsesAndChunks) {
  const ResponseHeader h{.endpoint = Endpoint::kChat, .id = "chatcmpl-1", .model = "m", .created = 5};
  const nlohmann::json full = completion_body(h, "hello", "stop", {3, 2}, std::nullopt);
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(full["usage"]["total_tokens"], 5);
  const nlohmann::json first = chunk_body(h, "", std::nullopt, true, std::nullopt);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(sse_event({{"a", 1}}), "data: {\"a\":1}\n\n");
  const ResponseHeader c{.endpoint = Endpoint::kCompletions, .id = "cmpl-1", .model = "m", .created = 5};
  EXPECT_EQ(chunk_body(c, "t", "length", false, std::nullopt)["choices"][0]["text"], "t");
  EXPECT_EQ(usage_chunk_body(c, {1, 1})["choices"].size(), 0u);
  EXPECT_TRUE(full["choices"][0]["logprobs"].is_null());
}

TEST(Protocol, ParsesLogprobsAndIgnoreEos) {
  const auto parsed = [](const std::string& body, Endpoint e) {
    auto r = parse_request(body, e);
    EXPECT_TRUE(std::holds_alternative<GenerationRequest>(r)) << body;
    return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r).sampling : engine::SamplingParams{};
  };
  EXPECT_EQ(parsed(R"({"prompt":"x","logprobs":5,"ignore_eos":true})", Endpoint::kCompletions).logprobs, 5);
  EXPECT_TRUE(parsed(R"({"prompt":"x","logprobs":0,"ignore_eos":true})", Endpoint::kCompletions).ignore_eos);
  EXPECT_EQ(parsed(R"({"prompt":"x"})", Endpoint::kCompletions).logprobs, std::nullopt);
  const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(parsed("{" + messages + R"(,"logprobs":true,"top_logprobs":2})", Endpoint::kChat).logprobs, 2);
  EXPECT_EQ(parsed("{" + messages + R"(,"logprobs":true})", Endpoint::kChat).logprobs, 0);
  EXPECT_EQ(parsed("{" + messages + R"(,"logprobs":false})", Endpoint::kChat).logprobs, std::nullopt);
}

// A token that is part of a UTF-8 character: its text has U+FFFD, its bytes are raw.
TEST(Protocol, BuildsLogprobsInBothShapes) {
  const std::vector<LogprobsEntry> entries = {
      {.chosen = {"Hi", -0.5f}, .top = {{"Hi", -0.5f}, {"Ho", -1.5f}}, .text_offset = 0},
      {.chosen = {"\xe4\xbd", -2.0f}, .top = {{"!", -0.25f}}, .text_offset = 2},
  };
  const nlohmann::json c = logprobs_json(Endpoint::kCompletions, entries);
  EXPECT_EQ(c["tokens"], nlohmann::json({"Hi", "\ufffd"}));
  EXPECT_EQ(c["token_logprobs"], nlohmann::json({-0.5, -2.0}));
  EXPECT_EQ(c["top_logprobs"][0], nlohmann::json({{"Hi", -0.5}, {"Ho", -1.5}}));
  // The chosen token joins its alternatives.
  EXPECT_EQ(c["top_logprobs"][1], nlohmann::json({{"!", -0.25}, {"\ufffd", -2.0}}));
  EXPECT_EQ(c["text_offset"], nlohmann::json({0, 2}));
  const nlohmann::json chat = logprobs_json(Endpoint::kChat, entries);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][1]["token"], "\ufffd");
  EXPECT_EQ(chat["content"][1]["bytes"], nlohmann::json({0xe4, 0xbd}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1],
            nlohmann::json({{"token", "Ho"}, {"logprob", -1.5}, {"bytes", {72, 111}}}));
  const ResponseHeader h{.endpoint = Endpoint::kChat, .id = "chatcmpl-1", .model = "m", .created = 5};
  EXPECT_EQ(chunk_body(h, "Hi", std::nullopt, false, entries)["choices"][0]["logprobs"], chat);
}

}  // namespace
}  // namespace evt::server
