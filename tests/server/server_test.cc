// The server over real HTTP on loopback: completions and chat, whole and streamed; 32 streaming
// clients at once get what each gets alone; bad input gets the right status and error JSON and
// the server keeps answering; a full queue gets 429; clients that hang up mid-stream have their
// requests aborted, leaving no KV page in use, and so do clients that hang up while waiting for
// a whole response; logprobs, whole and streamed.

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "server/test_server.h"

namespace evt::server::testing {
namespace {

using json = nlohmann::json;

struct Reply {
  int status = 0;
  json body;
};

// The events of a streamed reply and what the client saw of it.
struct Streamed {
  int status = 0;
  std::vector<json> chunks;
  bool done = false;  // ended with data: [DONE]
  std::string text;   // the chunks' text joined
  std::vector<std::string> finish_reasons;
  std::string error;  // httplib's, when the request failed
};

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(std::chrono::seconds(60));
    return c;
  }

  static Reply post(const std::string& path, const std::string& body) {
    httplib::Client c = client();
    const httplib::Result r = c.Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(r) << "no response to " << path;
    if (!r) return {};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  static Reply post(const std::string& path, const json& body) { return post(path, body.dump()); }

  // Posts a streaming request; stop_after > 0 hangs up after that many chunks.
  static Streamed stream(const std::string& path, json body, int stop_after = 0) {
    body["stream"] = true;
    Streamed s;
    std::string buffer;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
        const std::string event = buffer.substr(0, end);
        EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
        if (event == "data: [DONE]") {
          s.done = true;
          continue;
        }
        const json chunk = json::parse(event.substr(6));
        s.chunks.push_back(chunk);
        if (chunk.contains("choices") && !chunk["choices"].empty()) {
          const json& choice = chunk["choices"][0];
          s.text += choice.contains("delta") ? choice["delta"].value("content", "") : choice["text"].get<std::string>();
          if (!choice["finish_reason"].is_null()) s.finish_reasons.push_back(choice["finish_reason"]);
        }
      }
      return stop_after == 0 || static_cast<int>(s.chunks.size()) < stop_after;
    };
    httplib::Client c = client();
    const httplib::Result r = c.send(req);
    if (r) s.status = r->status;
    s.error = httplib::to_string(r.error());
    return s;
  }

  static std::string get(const std::string& path, int* status = nullptr) {
    httplib::Client c = client();
    const httplib::Result r = c.Get(path.c_str());
    EXPECT_TRUE(r) << "no response to " << path;
    if (status) *status = r ? r->status : 0;
    return r ? r->body : "";
  }

  // A gauge or counter of /metrics, -1 when absent.
  static double metric(const std::string& line_start) {
    const std::string text = get("/metrics");
    const size_t at = text.find("\n" + line_start + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + line_start.size() + 2));
  }

  // Waits for the engine to give back every page (aborts are taken at its next step).
  static void expect_pages_freed() {
    for (int i = 0; i < 200 && metric("eventide_kv_pages_used") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(metric("eventide_kv_pages_used"), 0);
    EXPECT_EQ(metric("eventide_requests_running"), 0);
  }

  static json completion(const std::string& prompt, int max_tokens) {
    return {{"model", "qwen3-tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }
  static json chat(const std::string& content, int max_tokens) {
    return {{"model", "qwen3-tiny"},
            {"messages", {{{"role", "user"}, {"content", content}}}},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
  }

  static TestServer* server_;
};

TestServer* ServerTest::server_ = nullptr;

TEST_F(ServerTest, HealthAndModels) {
  int status = 0;
  EXPECT_EQ(json::parse(get("/health", &status))["status"], "ok");
  EXPECT_EQ(status, 200);
  const json models = json::parse(get("/v1/models"));
  EXPECT_EQ(models["data"][0]["id"], "qwen3-tiny");
  EXPECT_EQ(models["data"][0]["max_model_len"], 256);  // the fixture's positions
  EXPECT_EQ(models["data"][0]["vocab_size"], 1024);
}

// What benchmark clients send: a prompt of token ids, and ignore_eos so that every request
// generates exactly max_tokens.
TEST_F(ServerTest, TokenIdPromptsAndIgnoreEos) {
  const Reply r = post("/v1/completions", json{{"prompt", {5, 77, 300, 1001}}, {"max_tokens", 12}, {"ignore_eos", true},
                                               {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
}

TEST_F(ServerTest, CompletionWholeEqualsStreamed) {
  const Reply whole = post("/v1/completions", completion("The quick brown fox", 10));
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  EXPECT_EQ(whole.body["object"], "text_completion");
  EXPECT_EQ(whole.body["usage"]["completion_tokens"], 10);
  EXPECT_EQ(whole.body["choices"][0]["finish_reason"], "length");
  json body = completion("The quick brown fox", 10);
  body["stream_options"] = {{"include_usage", true}};
  const Streamed s = stream("/v1/completions", body);
  EXPECT_EQ(s.status, 200);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, whole.body["choices"][0]["text"]);
  EXPECT_EQ(s.finish_reasons, std::vector<std::string>{"length"});
  ASSERT_FALSE(s.chunks.empty());
  EXPECT_EQ(s.chunks.back()["usage"], whole.body["usage"]);
}

TEST_F(ServerTest, ChatWholeEqualsStreamed) {
  const Reply whole = post("/v1/chat/completions", chat("Hello there", 8));
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  EXPECT_EQ(whole.body["object"], "chat.completion");
  EXPECT_EQ(whole.body["choices"][0]["message"]["role"], "assistant");
  EXPECT_GT(whole.body["usage"]["prompt_tokens"].get<int>(), 5);
  const Streamed s = stream("/v1/chat/completions", chat("Hello there", 8));
  EXPECT_TRUE(s.done);
  ASSERT_FALSE(s.chunks.empty());
  EXPECT_EQ(s.chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(s.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(s.text, whole.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(s.finish_reasons.size(), 1u);
  EXPECT_EQ(s.finish_reasons[0], whole.body["choices"][0]["finish_reason"]);
}

TEST_F(ServerTest, StopStringsCutTheText) {
  const Reply full = post("/v1/completions", completion("Once upon a time", 16));
  ASSERT_EQ(full.status, 200);
  const std::string text = full.body["choices"][0]["text"];
  // A stop string from the middle of the greedy output: an ASCII character after the first.
  size_t at = 1;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) >= 0x80 || text[at] == ' ')) ++at;
  ASSERT_LT(at, text.size()) << "no ASCII character to stop at in: " << text;
  const std::string stop = text.substr(at, 1);
  const std::string expected = text.substr(0, text.find(stop));
  json body = completion("Once upon a time", 16);
  body["stop"] = {stop, "never appears in this output \x01"};
  const Reply cut = post("/v1/completions", body);
  ASSERT_EQ(cut.status, 200);
  EXPECT_EQ(cut.body["choices"][0]["text"], expected);
  EXPECT_EQ(cut.body["choices"][0]["finish_reason"], "stop");
  const Streamed s = stream("/v1/completions", body);
  EXPECT_EQ(s.text, expected);
  EXPECT_EQ(s.finish_reasons, std::vector<std::string>{"stop"});
  expect_pages_freed();
}

TEST_F(ServerTest, SeededSamplingRepeats) {
  json body = completion("Sampling", 8);
  body.update({{"temperature", 0.9}, {"top_p", 0.9}, {"top_k", 50}, {"min_p", 0.01}, {"presence_penalty", 0.5},
               {"frequency_penalty", 0.5}, {"seed", 1234}});
  const Reply a = post("/v1/completions", body);
  const Reply b = post("/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
}

TEST_F(ServerTest, ConcurrentStreamsEqualAlone) {
  constexpr int kClients = 32;
  std::vector<json> bodies;
  for (int i = 0; i < kClients; ++i) {
    bodies.push_back(i % 2 ? chat("Question " + std::to_string(i), 6)
                           : completion("Prompt number " + std::to_string(i * 7), 6));
  }
  const auto path = [](int i) { return i % 2 ? "/v1/chat/completions" : "/v1/completions"; };
  std::vector<Streamed> alone, together(kClients);
  for (int i = 0; i < kClients; ++i) alone.push_back(stream(path(i), bodies[i]));
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] { together[i] = stream(path(i), bodies[i]); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(together[i].done) << i << ": status " << together[i].status << ", " << together[i].error;
    EXPECT_EQ(together[i].text, alone[i].text) << i;
    EXPECT_EQ(together[i].finish_reasons, alone[i].finish_reasons) << i;
  }
  expect_pages_freed();
}

TEST_F(ServerTest, DisconnectsAbortTheirRequests) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([i] {
      // The fixture serves 256 positions: this one would run for ~230 tokens.
      const Streamed s = stream("/v1/completions", completion("Hang up " + std::to_string(i), 230), 2);
      EXPECT_FALSE(s.done);
    });
  }
  for (std::thread& t : threads) t.join();
  expect_pages_freed();
  EXPECT_GE(metric("eventide_generation_requests_total{outcome=\"disconnected\"}"), 4);
  // And the server still serves.
  EXPECT_EQ(post("/v1/completions", completion("After", 2)).status, 200);
}

// A client waiting for a whole (not streamed) response hangs up: the server notices by
// watching the socket, aborts the request and frees its pages.
TEST_F(ServerTest, DisconnectsWhileWaitingForAWholeResponseAbortTheirRequests) {
  const double before = metric("eventide_generation_requests_total{outcome=\"disconnected\"}");
  const std::string body = completion("Hang up whole", 230).dump();
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  // Hang up once the engine runs it (230 tokens take seconds on the CPU).
  for (int i = 0; i < 500 && metric("eventide_requests_running") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(metric("eventide_requests_running"), 1);
  close(fd);
  expect_pages_freed();
  EXPECT_EQ(metric("eventide_generation_requests_total{outcome=\"disconnected\"}"), before < 0 ? 1 : before + 1);
  EXPECT_EQ(post("/v1/completions", completion("After", 2)).status, 200);
}

// The streamed logprobs joined equal the whole response's; greedy tokens are their own top
// alternative; the values are log-probabilities.
TEST_F(ServerTest, CompletionLogprobs) {
  json body = completion("Log probabilities", 8);
  body["logprobs"] = 3;
  const Reply whole = post("/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const json& lp = whole.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u) << lp.dump();
  ASSERT_EQ(lp["token_logprobs"].size(), 8u);
  ASSERT_EQ(lp["top_logprobs"].size(), 8u);
  ASSERT_EQ(lp["text_offset"].size(), 8u);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    const float logprob = lp["token_logprobs"][i];
    EXPECT_LE(logprob, 0);
    const json& top = lp["top_logprobs"][i];
    EXPECT_GE(top.size(), 3u);  // 3 alternatives, and the chosen token if it is not one of them
    EXPECT_LE(top.size(), 4u);
    ASSERT_TRUE(top.contains(lp["tokens"][i].get<std::string>())) << top.dump();
    float best = -1e30f;
    for (const auto& [token, value] : top.items()) best = std::max(best, value.get<float>());
    EXPECT_EQ(logprob, best) << "greedy: the chosen token is the most likely";
    EXPECT_EQ(lp["text_offset"][i], joined.size());  // ASCII here: characters are bytes
    joined += lp["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(joined, whole.body["choices"][0]["text"]);
  const Streamed s = stream("/v1/completions", body);
  json streamed = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                   {"text_offset", json::array()}};
  for (const json& chunk : s.chunks) {
    for (const auto& [key, values] : chunk["choices"][0]["logprobs"].items()) {
      for (const json& v : values) streamed[key].push_back(v);
    }
  }
  EXPECT_EQ(streamed, lp);
  // Without the field, logprobs stay null.
  EXPECT_TRUE(post("/v1/completions", completion("Log probabilities", 2)).body["choices"][0]["logprobs"].is_null());
}

TEST_F(ServerTest, ChatLogprobs) {
  json body = chat("Log probabilities", 6);
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  const Reply whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const json& content = whole.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u) << whole.body.dump();
  for (const json& entry : content) {
    EXPECT_LE(entry["logprob"].get<float>(), 0);
    ASSERT_EQ(entry["top_logprobs"].size(), 2u);
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);
    EXPECT_EQ(entry["top_logprobs"][0]["logprob"], entry["logprob"]);
    EXPECT_EQ(entry["top_logprobs"][0]["bytes"], entry["bytes"]);
    EXPECT_GE(entry["top_logprobs"][0]["logprob"].get<float>(), entry["top_logprobs"][1]["logprob"].get<float>());
    std::string bytes;
    for (const json& b : entry["bytes"]) bytes += static_cast<char>(b.get<int>());
    EXPECT_EQ(bytes, entry["token"]);  // whole characters here
  }
  const Streamed s = stream("/v1/chat/completions", body);
  json streamed = json::array();
  for (const json& chunk : s.chunks) {
    const json& lp = chunk["choices"][0]["logprobs"];
    if (!lp.is_null()) {
      for (const json& entry : lp["content"]) streamed.push_back(entry);
    }
  }
  EXPECT_EQ(streamed, content);
  body["top_logprobs"] = 0;
  const Reply none = post("/v1/chat/completions", body);
  ASSERT_EQ(none.status, 200);
  EXPECT_TRUE(none.body["choices"][0]["logprobs"]["content"][0]["top_logprobs"].empty());
}

TEST_F(ServerTest, MetricsHaveLatenciesAndCounts) {
  ASSERT_EQ(post("/v1/completions", completion("Count me", 3)).status, 200);
  const std::string text = get("/metrics");
  EXPECT_NE(text.find("# TYPE eventide_time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_GT(metric("eventide_time_to_first_token_seconds_count"), 0);
  EXPECT_GT(metric("eventide_inter_token_latency_seconds_count"), 0);
  EXPECT_GT(metric("eventide_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), 0);
  EXPECT_GT(metric("eventide_kv_pages_total"), 0);
  EXPECT_GE(metric("eventide_requests_waiting"), 0);
}

struct BadCase {
  std::string name, path, body;
  int status;
  std::string param;  // expected error.param; empty: not checked
};

TEST_F(ServerTest, BadInputGetsOpenAIErrorsAndTheServerGoesOn) {
  const std::string c = "/v1/completions", ch = "/v1/chat/completions";
  const std::vector<BadCase> cases = {
      {"not json", c, "{\"prompt\": ", 400, ""},
      {"not an object", c, "[1, 2]", 400, ""},
      {"empty body", c, "", 400, ""},
      {"missing prompt", c, R"({"max_tokens": 3})", 400, "prompt"},
      {"prompt wrong type", c, R"({"prompt": 5})", 400, "prompt"},
      {"two prompts", c, R"({"prompt": ["a", "b"]})", 400, "prompt"},
      {"negative token id", c, R"({"prompt": [1, -2]})", 400, "prompt"},
      {"token id beyond vocab", c, R"({"prompt": [1, 5000]})", 400, ""},
      {"empty prompt", c, R"({"prompt": ""})", 400, ""},
      {"unknown model", c, R"({"model": "gpt-9", "prompt": "x"})", 404, "model"},
      {"model wrong type", c, R"({"model": 3, "prompt": "x"})", 400, "model"},
      {"max_tokens string", c, R"({"prompt": "x", "max_tokens": "5"})", 400, "max_tokens"},
      {"max_tokens float", c, R"({"prompt": "x", "max_tokens": 2.5})", 400, "max_tokens"},
      {"max_tokens zero", c, R"({"prompt": "x", "max_tokens": 0})", 400, ""},
      {"max_tokens negative", c, R"({"prompt": "x", "max_tokens": -4})", 400, ""},
      {"max_tokens beyond context", c, R"({"prompt": "x", "max_tokens": 100000})", 400, ""},
      {"max_tokens beyond int64", c, R"({"prompt": "x", "max_tokens": 18446744073709551615})", 400, "max_tokens"},
      {"prompt beyond context", c, json{{"prompt", std::vector<int>(300, 5)}, {"max_tokens", 1}}.dump(), 400, ""},
      {"temperature negative", c, R"({"prompt": "x", "temperature": -1})", 400, ""},
      {"temperature absurd", c, R"({"prompt": "x", "temperature": 1e30})", 400, ""},
      {"top_p zero", c, R"({"prompt": "x", "top_p": 0})", 400, ""},
      {"top_p string", c, R"({"prompt": "x", "top_p": "0.5"})", 400, "top_p"},
      {"top_k negative", c, R"({"prompt": "x", "top_k": -5})", 400, "top_k"},
      {"min_p above 1", c, R"({"prompt": "x", "min_p": 2})", 400, ""},
      {"presence_penalty absurd", c, R"({"prompt": "x", "presence_penalty": 9})", 400, ""},
      {"frequency_penalty absurd", c, R"({"prompt": "x", "frequency_penalty": -9})", 400, ""},
      {"seed string", c, R"({"prompt": "x", "seed": "s"})", 400, "seed"},
      {"n of 2", c, R"({"prompt": "x", "n": 2})", 400, "n"},
      {"logprobs above 5", c, R"({"prompt": "x", "logprobs": 6})", 400, "logprobs"},
      {"logprobs negative", c, R"({"prompt": "x", "logprobs": -1})", 400, "logprobs"},
      {"logprobs bool", c, R"({"prompt": "x", "logprobs": true})", 400, "logprobs"},
      {"logprobs string", c, R"({"prompt": "x", "logprobs": "2"})", 400, "logprobs"},
      {"ignore_eos not bool", c, R"({"prompt": "x", "ignore_eos": 1})", 400, "ignore_eos"},
      {"stream not bool", c, R"({"prompt": "x", "stream": "yes"})", 400, "stream"},
      {"empty stop", c, R"({"prompt": "x", "stop": [""]})", 400, "stop"},
      {"stop wrong type", c, R"({"prompt": "x", "stop": 3})", 400, "stop"},
      {"chat missing messages", ch, R"({"model": "qwen3-tiny"})", 400, "messages"},
      {"chat empty messages", ch, R"({"messages": []})", 400, "messages"},
      {"chat message not object", ch, R"({"messages": ["hi"]})", 400, "messages[0]"},
      {"chat missing content", ch, R"({"messages": [{"role": "user"}]})", 400, "messages[0]"},
      {"chat unknown role", ch, R"({"messages": [{"role": "wizard", "content": "x"}]})", 400, "messages"},
      {"chat logprobs int", ch, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", 400, "logprobs"},
      {"chat top_logprobs above 5", ch,
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 9})", 400, "top_logprobs"},
      {"chat top_logprobs float", ch,
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 1.5})", 400,
       "top_logprobs"},
      {"chat top_logprobs without logprobs", ch, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       400, "top_logprobs"},
      {"chat tools", ch, R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", 400, "tools"},
      {"huge body", c, json{{"prompt", std::string(100 << 10, 'a')}}.dump(), 413, ""},
  };
  for (const BadCase& bc : cases) {
    SCOPED_TRACE(bc.name);
    const Reply r = post(bc.path, bc.body);
    EXPECT_EQ(r.status, bc.status) << r.body.dump();
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.body.dump();
    const json& e = r.body["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("param") && e.contains("code"));
    if (!bc.param.empty()) {
      EXPECT_EQ(e["param"], bc.param);
    }
    int status = 0;
    get("/health", &status);
    EXPECT_EQ(status, 200);
  }
  int status = 0;
  const json unknown = json::parse(get("/v1/nope", &status));
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(unknown.contains("error"));
  expect_pages_freed();
}

TEST(ServerBusyTest, AFullQueueGets429) {
  // The engine never steps, so the request queued here keeps the queue full.
  TestServer server({.max_waiting = 1}, /*start_engine=*/false);
  const engine::Submission queued = server.engine().submit({.prompt = {1, 2, 3}}, [](const engine::TokenEvent&) {});
  ASSERT_TRUE(queued.accepted()) << queued.error;
  httplib::Client c("127.0.0.1", server.port());
  const httplib::Result r = c.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  const json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["type"], "rate_limit_error");
  EXPECT_EQ(e["code"], "server_busy");
}

}  // namespace
}  // namespace evt::server::testing
