// The serving engine end to end on a model fixture: the batched engine gives every request the
// tokens it gets alone (greedy and seeded sampling, penalties, prompts of every length, late
// arrivals, any chunk size, under preemption), requests stop where they should, aborts and
// shutdown free everything, bad requests are turned away with the field named, and submits
// from many threads while the engine runs on its own thread all complete. After every test the
// KV pool is empty.

#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>

#include "engine/engine_test.h"
#include "kernels/llm/sample.h"
#include "model/fixture_reference.h"

namespace evt::engine::testing {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
  std::string error;
  bool operator==(const Outcome& o) const { return tokens == o.tokens && finish == o.finish; }
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << finish_reason_name(o.finish) << " [";
  for (int32_t t : o.tokens) os << t << " ";
  return os << "] " << o.error;
}

class EngineTest : public ::testing::TestWithParam<std::tuple<std::string, model::Exec>> {
 protected:
  void SetUp() override {
    auto model = model::load_model(model::testing::fixture_dir(std::get<0>(GetParam())));
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = *model;
  }

  std::unique_ptr<Engine> make_engine(int64_t pages, const SchedulerOptions& s = {}, int64_t max_waiting = 4096) {
    auto decoder = make_engine_decoder(model_, std::get<1>(GetParam()), pages);
    EXPECT_TRUE(decoder.ok()) << decoder.status().message();
    if (!decoder.ok()) return nullptr;
    auto engine = Engine::create(std::move(*decoder), {.scheduler = s, .max_waiting = max_waiting});
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // Submits a request whose events land in outcomes[key].
  static RequestId submit(Engine& e, Request r, std::map<int, Outcome>& outcomes, int key) {
    const Submission s = e.submit(std::move(r), [&outcomes, key](const TokenEvent& ev) {
      Outcome& o = outcomes[key];
      EXPECT_EQ(o.finish, FinishReason::kNone) << "an event after the request ended";
      if (ev.token >= 0) o.tokens.push_back(ev.token);
      o.finish = ev.finish;
      o.error = ev.error;
    });
    EXPECT_TRUE(s.accepted()) << s.error;
    return s.id;
  }

  // Each request alone through a fresh engine with room for it.
  std::vector<Outcome> alone(const std::vector<Request>& requests) {
    std::vector<Outcome> out;
    std::unique_ptr<Engine> e = make_engine(64);
    for (const Request& r : requests) {
      std::map<int, Outcome> o;
      submit(*e, r, o, 0);
      EXPECT_TRUE(e->run_until_idle().ok());
      out.push_back(o[0]);
    }
    expect_idle(*e);
    return out;
  }

  static void expect_idle(const Engine& e) {
    const EngineMetrics m = e.metrics();
    EXPECT_EQ(m.kv_pages_used, 0);
    EXPECT_EQ(m.running, 0);
    EXPECT_EQ(m.waiting, 0);
  }

  // Random prompts of 1-60 tokens with 1-12 new tokens, a third of them sampled with a seed and
  // some with penalties.
  std::vector<Request> random_requests(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<Request> out;
    for (int i = 0; i < n; ++i) {
      Request r;
      r.prompt.resize(static_cast<size_t>(pick(1, 60)));
      for (int32_t& t : r.prompt) t = pick(0, static_cast<int>(model_->config.vocab_size) - 1);
      r.sampling.max_tokens = pick(1, 12);
      r.sampling.ignore_eos = true;
      if (i % 3 == 1) {
        r.sampling.temperature = 0.8f;
        r.sampling.top_k = 40;
        r.sampling.top_p = 0.9f;
        r.sampling.seed = 1000 + i;
      }
      if (i % 4 == 2) {
        r.sampling.presence_penalty = 0.5f;
        r.sampling.frequency_penalty = 0.3f;
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  // Submits requests[i] before step arrival_step[i] and runs until every one has ended.
  std::vector<Outcome> batched(Engine& e, const std::vector<Request>& requests, const std::vector<int>& arrival_step) {
    std::map<int, Outcome> outcomes;
    size_t next = 0;
    for (int step = 0; next < requests.size() || e.metrics().running + e.metrics().waiting > 0; ++step) {
      for (; next < requests.size() && arrival_step[next] <= step; ++next) {
        submit(e, requests[next], outcomes, static_cast<int>(next));
      }
      auto ran = e.step();
      EXPECT_TRUE(ran.ok()) << ran.status().message();
      if (!ran.ok() || step > 10000) break;
    }
    std::vector<Outcome> out;
    for (size_t i = 0; i < requests.size(); ++i) out.push_back(outcomes[static_cast<int>(i)]);
    return out;
  }

  std::shared_ptr<const model::LoadedModel> model_;
};

TEST_P(EngineTest, BatchedRequestsGetTheTokensTheyGetAlone) {
  const std::vector<Request> requests = random_requests(12, 7);
  const std::vector<Outcome> expected = alone(requests);
  for (const Outcome& o : expected) ASSERT_EQ(o.finish, FinishReason::kLength) << o;
  std::mt19937 rng(3);
  std::vector<int> arrivals;
  for (size_t i = 0; i < requests.size(); ++i) arrivals.push_back(static_cast<int>(rng() % 8));
  std::sort(arrivals.begin(), arrivals.end());
  for (int64_t chunk : {int64_t{0}, int64_t{5}, int64_t{16}, int64_t{512}}) {
    SCOPED_TRACE("chunk size " + std::to_string(chunk));
    std::unique_ptr<Engine> e =
        make_engine(64, {.max_batched_tokens = chunk == 0 ? 128 : 48, .chunk_size = chunk, .max_sequences = 6});
    const std::vector<Outcome> got = batched(*e, requests, arrivals);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "request " << i;
    expect_idle(*e);
    EXPECT_GT(e->metrics().batch_shapes, 1);
  }
}

TEST_P(EngineTest, PreemptionUnderATinyPoolKeepsTheOutput) {
  const std::vector<Request> requests = random_requests(8, 11);
  const std::vector<Outcome> expected = alone(requests);
  // 6 pages of 16: at most 96 positions for 8 requests of up to 72.
  std::unique_ptr<Engine> e = make_engine(6, {.max_batched_tokens = 64, .chunk_size = 8, .max_sequences = 8});
  const std::vector<Outcome> got = batched(*e, requests, std::vector<int>(requests.size(), 0));
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "request " << i;
  EXPECT_GT(e->metrics().preemptions, 0);
  expect_idle(*e);
}

// The sample task is wired in: a seed gives the same tokens every time, other seeds others (at
// a temperature that flattens even qwen3-tiny's peaked distribution).
TEST_P(EngineTest, SeedsReachTheSampler) {
  Request base = random_requests(1, 21)[0];
  base.sampling.max_tokens = 12;
  base.sampling.temperature = 50;
  std::vector<Request> requests;
  for (uint64_t seed : {1, 1, 2}) {
    requests.push_back(base);
    requests.back().sampling.seed = seed;
  }
  const std::vector<Outcome> o = alone(requests);
  EXPECT_EQ(o[0], o[1]);
  EXPECT_NE(o[0], o[2]);
}

// Penalties reach the sample task through the step's pen buffers: a huge count on the greedy
// token hands the step to the runner-up.
TEST_P(EngineTest, PenaltiesReachTheSampleTask) {
  auto decoder = make_engine_decoder(model_, std::get<1>(GetParam()), 4);
  ASSERT_TRUE(decoder.ok()) << decoder.status().message();
  model::StepBatch b;
  b.ids = {5, 77, 300};
  b.positions = {0, 1, 2};
  b.token_seq = {0, 0, 0};
  b.logit_rows = {2};
  b.block_table = {0};
  b.pages_per_seq = 1;
  auto plain = (*decoder)->step(b, true);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const std::vector<float>& logits = plain->logits;
  const auto top = std::max_element(logits.begin(), logits.end()) - logits.begin();
  ASSERT_EQ(plain->next[0], top);
  std::vector<float> penalized = logits;
  penalized[static_cast<size_t>(top)] -= 2.0f * 1000;
  const auto runner_up = std::max_element(penalized.begin(), penalized.end()) - penalized.begin();

  b.sample_words.assign(kernels::llm::kSampleWords, 0);
  kernels::llm::SampleParams p;
  p.frequency = 2;
  kernels::llm::pack_sample_row(p, b.sample_words.data());
  b.penalty_start = {0, 1};
  b.penalties = {static_cast<int32_t>(top), 1000};
  auto out = (*decoder)->step(b, false);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->next[0], runner_up);
}

// A decoder that keeps the logits of every step that asked for them, for checking logprobs.
class RecordingDecoder : public model::Decoder {
 public:
  explicit RecordingDecoder(std::unique_ptr<model::Decoder> inner) : inner_(std::move(inner)) {}
  const model::ModelConfig& config() const override { return inner_->config(); }
  model::KvGeometry kv() const override { return inner_->kv(); }
  std::string describe() const override { return inner_->describe(); }
  Expected<model::StepOutput> step(const model::StepBatch& batch, bool want_logits) override {
    Expected<model::StepOutput> out = inner_->step(batch, want_logits);
    if (out.ok() && want_logits) logits_->push_back(out->logits);
    return out;
  }
  // Outlives the decoder, which the engine owns.
  std::shared_ptr<std::vector<std::vector<float>>> logits_ = std::make_shared<std::vector<std::vector<float>>>();

 private:
  std::unique_ptr<model::Decoder> inner_;
};

std::vector<float> log_softmax(const std::vector<float>& logits) {
  const float m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - m);
  std::vector<float> out;
  for (float x : logits) out.push_back(static_cast<float>(x - m - std::log(sum)));
  return out;
}

// Logprobs are the log-softmax of the step's raw logits (not of the tempered distribution): the
// engine's values equal those recomputed here from the logits the decoder returned, and,
// within the fixture's logits tolerance, those of Hugging Face's float32 logits. Steps copy
// logits only for the requests that ask, and a request that does not ask gets none.
TEST_P(EngineTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  const model::testing::FixtureReference ref = model::testing::load_fixture_reference(std::get<0>(GetParam()));
  auto inner = make_engine_decoder(model_, std::get<1>(GetParam()), 64);
  ASSERT_TRUE(inner.ok()) << inner.status().message();
  auto recording = std::make_unique<RecordingDecoder>(std::move(*inner));
  const auto recorded = recording->logits_;
  auto created = Engine::create(std::move(recording), {});
  ASSERT_TRUE(created.ok()) << created.status().message();
  Engine& e = **created;
  for (const model::testing::FixturePrompt& p : ref.prompts) {
    for (const float temperature : {0.0f, 5.0f}) {
      SCOPED_TRACE(::testing::Message() << p.tokens.size() << "-token prompt, temperature " << temperature);
      Request r{.prompt = p.tokens, .sampling = {}};
      r.sampling.temperature = temperature;
      r.sampling.seed = 3;
      r.sampling.max_tokens = static_cast<int64_t>(p.logits.size());
      r.sampling.ignore_eos = true;
      r.sampling.logprobs = kMaxLogprobs;
      std::vector<TokenEvent> events;
      ASSERT_TRUE(e.submit(r, [&](const TokenEvent& ev) { events.push_back(ev); }).accepted());
      recorded->clear();
      ASSERT_TRUE(e.run_until_idle().ok());
      // Alone in the engine, every step runs this one sequence and samples it.
      ASSERT_EQ(events.size(), p.logits.size());
      ASSERT_EQ(recorded->size(), p.logits.size());
      for (size_t s = 0; s < events.size(); ++s) {
        const TokenEvent& ev = events[s];
        ASSERT_TRUE(ev.logprobs.has_value()) << "token " << s;
        const std::vector<float> expected = log_softmax((*recorded)[s]);
        const auto token = static_cast<size_t>(ev.token);
        EXPECT_LE(ev.logprobs->logprob, 0);
        EXPECT_NEAR(ev.logprobs->logprob, expected[token], 1e-5) << "token " << s;
        if (temperature == 0 || s == 0) {  // where the sequence is still the one HF continued
          // log_z moves by at most the logits' error, so a logprob by at most twice it.
          EXPECT_NEAR(ev.logprobs->logprob, log_softmax(p.logits[s])[token], 2 * ref.logits_tolerance) << "token " << s;
        }
        ASSERT_EQ(ev.logprobs->top.size(), static_cast<size_t>(kMaxLogprobs));
        for (size_t k = 0; k < ev.logprobs->top.size(); ++k) {
          const auto [id, logprob] = ev.logprobs->top[k];
          EXPECT_NEAR(logprob, expected[static_cast<size_t>(id)], 1e-5);
          if (k > 0) {
            EXPECT_GE(ev.logprobs->top[k - 1].second, logprob);
          }
        }
        EXPECT_GE(ev.logprobs->top[0].second, *std::max_element(expected.begin(), expected.end()) - 1e-6f);
        if (temperature == 0) {
          EXPECT_EQ(ev.logprobs->top[0].first, ev.token) << "token " << s;
          EXPECT_EQ(ev.token, p.greedy[s]);
        }
      }
    }
  }
  // Batched with a request that asks for none: that one gets none, the other its own.
  std::vector<TokenEvent> with;
  Request plain{.prompt = ref.prompts[0].tokens, .sampling = {}};
  plain.sampling.max_tokens = 3;
  plain.sampling.ignore_eos = true;
  Request asking = plain;
  asking.sampling.logprobs = 0;
  ASSERT_TRUE(e.submit(plain, [&](const TokenEvent& ev) { EXPECT_FALSE(ev.logprobs.has_value()); }).accepted());
  ASSERT_TRUE(e.submit(asking, [&](const TokenEvent& ev) { with.push_back(ev); }).accepted());
  ASSERT_TRUE(e.run_until_idle().ok());
  ASSERT_EQ(with.size(), 3u);
  for (const TokenEvent& ev : with) {
    ASSERT_TRUE(ev.logprobs.has_value());
    EXPECT_TRUE(ev.logprobs->top.empty());
    EXPECT_LE(ev.logprobs->logprob, 0);
  }
  expect_idle(e);
}

TEST_P(EngineTest, StopTokensAndMaxTokensEndARequest) {
  Request r = random_requests(1, 5)[0];
  r.sampling.max_tokens = 8;
  const Outcome full = alone({r})[0];
  ASSERT_EQ(full.tokens.size(), 8u);
  ASSERT_EQ(full.finish, FinishReason::kLength);
  // Stopping at the 3rd token's id ends the request there (or earlier, if it came up before).
  Request stop = r;
  stop.sampling.stop_token_ids = {full.tokens[2]};
  const Outcome stopped = alone({stop})[0];
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  const auto first = std::find(full.tokens.begin(), full.tokens.end(), full.tokens[2]);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), first + 1));
}

TEST_P(EngineTest, AbortsFreeTheRequestWaitingOrRunning) {
  std::unique_ptr<Engine> e = make_engine(64, {.max_batched_tokens = 32, .chunk_size = 8, .max_sequences = 1});
  std::map<int, Outcome> o;
  std::vector<Request> requests = random_requests(3, 2);
  for (Request& r : requests) r.sampling.max_tokens = 50;
  const RequestId running = submit(*e, requests[0], o, 0);
  const RequestId waiting = submit(*e, requests[1], o, 1);
  submit(*e, requests[2], o, 2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e->step().ok());
  EXPECT_GT(e->metrics().kv_pages_used, 0);
  e->abort(running);
  e->abort(waiting);
  e->abort(waiting);    // twice: a no-op
  e->abort(123456);     // unknown: a no-op
  ASSERT_TRUE(e->step().ok());
  EXPECT_EQ(o[0].finish, FinishReason::kAbort);
  EXPECT_EQ(o[1].finish, FinishReason::kAbort);
  EXPECT_TRUE(o[1].tokens.empty());
  ASSERT_TRUE(e->run_until_idle().ok());
  EXPECT_EQ(o[2].finish, FinishReason::kLength);
  expect_idle(*e);
}

TEST_P(EngineTest, ShutdownAbortsWhatIsInFlight) {
  std::map<int, Outcome> o;
  {
    std::unique_ptr<Engine> e = make_engine(64);
    std::vector<Request> requests = random_requests(2, 4);
    submit(*e, requests[0], o, 0);
    submit(*e, requests[1], o, 1);
    ASSERT_TRUE(e->step().ok());
  }
  EXPECT_EQ(o[0].finish, FinishReason::kAbort);
  EXPECT_EQ(o[1].finish, FinishReason::kAbort);
}

TEST_P(EngineTest, BadRequestsAreTurnedAwayWithTheFieldNamed) {
  std::unique_ptr<Engine> e = make_engine(8, {}, /*max_waiting=*/2);
  const int64_t vocab = model_->config.vocab_size;
  const auto rejected = [&](Request r, Rejection why, const std::string& words) {
    const Submission s = e->submit(std::move(r), [](const TokenEvent&) { FAIL() << "no events for a rejection"; });
    EXPECT_FALSE(s.accepted());
    EXPECT_EQ(s.rejection, why);
    EXPECT_NE(s.error.find(words), std::string::npos) << s.error;
  };
  const auto request = [](std::vector<int32_t> prompt, const std::function<void(SamplingParams&)>& set = {}) {
    Request r;
    r.prompt = std::move(prompt);
    if (set) set(r.sampling);
    return r;
  };
  rejected(request({}), Rejection::kInvalid, "the prompt is empty");
  rejected(request({1, static_cast<int32_t>(vocab)}), Rejection::kInvalid, "prompt token 1 is id");
  rejected(request({1, -3}), Rejection::kInvalid, "prompt token 1 is id -3");
  rejected(request({1}, [](SamplingParams& p) { p.temperature = -1; }), Rejection::kInvalid, "temperature");
  rejected(request({1}, [](SamplingParams& p) { p.top_p = 0; }), Rejection::kInvalid, "top_p");
  rejected(request({1}, [](SamplingParams& p) { p.top_k = -2; }), Rejection::kInvalid, "top_k");
  rejected(request({1}, [](SamplingParams& p) { p.min_p = 2; }), Rejection::kInvalid, "min_p");
  rejected(request({1}, [](SamplingParams& p) { p.presence_penalty = 3; }), Rejection::kInvalid, "presence_penalty");
  rejected(request({1}, [](SamplingParams& p) { p.max_tokens = 0; }), Rejection::kInvalid, "max_tokens");
  rejected(request({1}, [](SamplingParams& p) { p.logprobs = kMaxLogprobs + 1; }), Rejection::kInvalid, "logprobs");
  rejected(request({1}, [&](SamplingParams& p) { p.stop_token_ids = {static_cast<int32_t>(vocab)}; }),
           Rejection::kInvalid, "stop token id");
  // 8 pages of 16: 128 positions.
  rejected(request(std::vector<int32_t>(100, 1), [](SamplingParams& p) { p.max_tokens = 29; }), Rejection::kTooLong,
           "needs 129 positions");
  std::map<int, Outcome> o;
  submit(*e, request({1, 2}), o, 0);
  submit(*e, request({3}), o, 1);
  rejected(request({4}), Rejection::kBusy, "busy");
  ASSERT_TRUE(e->run_until_idle().ok());
  expect_idle(*e);
}

TEST_P(EngineTest, ManyThreadsSubmitWhileTheEngineRuns) {
  const std::vector<Request> requests = random_requests(16, 9);
  const std::vector<Outcome> expected = alone(requests);
  std::unique_ptr<Engine> e = make_engine(64, {.max_batched_tokens = 40, .chunk_size = 8, .max_sequences = 5});
  e->start();
  std::mutex mutex;
  std::condition_variable done;
  std::vector<Outcome> got(requests.size());
  size_t finished = 0;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < requests.size(); i += 4) {
        const Submission s = e->submit(requests[i], [&, i](const TokenEvent& ev) {
          std::lock_guard lock(mutex);
          if (ev.token >= 0) got[i].tokens.push_back(ev.token);
          got[i].finish = ev.finish;
          if (ev.finish != FinishReason::kNone) {
            ++finished;
            done.notify_all();
          }
        });
        EXPECT_TRUE(s.accepted()) << s.error;
      }
    });
  }
  for (std::thread& c : clients) c.join();
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(done.wait_for(lock, std::chrono::seconds(120), [&] { return finished == requests.size(); }));
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "request " << i;
  expect_idle(*e);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineTest, ::testing::ValuesIn(engine_test_cases()),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) + "_" +
                                              std::string(model::exec_name(std::get<1>(info.param)));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace evt::engine::testing
