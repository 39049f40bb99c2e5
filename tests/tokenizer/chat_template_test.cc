// Compares with transformers' apply_chat_template through the reference file that
// scripts/chat_template_reference.py writes from the official Qwen3 and Llama 3 templates, byte
// for byte; then how loading and rendering fail.

#include "tokenizer/chat_template.h"

#include <fmt/chrono.h>
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "util/check.h"

namespace evt::tokenizer {
namespace {

using nlohmann::json;

const std::filesystem::path kSource = EVT_SOURCE_DIR;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  EVT_CHECK(file) << "cannot open " << path.string();
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

const json& reference() {
  static const json loaded = json::parse(read_text(kSource / "tests/tokenizer/data/chat_template_reference.json"));
  return loaded;
}

ChatTemplate reference_template(const std::string& name) {
  const json& entry = reference()["templates"][name];
  const std::string file = entry["file"].get<std::string>();
  const std::string bos_token = entry["bos_token"].is_null() ? "" : entry["bos_token"].get<std::string>();
  Expected<ChatTemplate> loaded = ChatTemplate::recognize(read_text(kSource / file), bos_token, file);
  EVT_CHECK(loaded.ok()) << loaded.status().message();
  return *loaded;
}

std::vector<ChatMessage> messages_of(const json& conversation) {
  std::vector<ChatMessage> messages;
  for (const json& message : conversation) {
    messages.push_back({.role = message["role"].get<std::string>(), .content = message["content"].get<std::string>()});
    if (message.contains("reasoning_content")) {
      messages.back().reasoning_content = message["reasoning_content"].get<std::string>();
    }
  }
  return messages;
}

ChatOptions options_of(const json& options) {
  ChatOptions out;
  out.add_generation_prompt = options.value("add_generation_prompt", false);
  out.enable_thinking = options.value("enable_thinking", true);
  if (options.contains("date_string")) out.date_string = options["date_string"].get<std::string>();
  return out;
}

TEST(ChatTemplate, RecognizesTheOfficialTemplates) {
  EXPECT_EQ(reference_template("qwen3").kind(), ChatTemplateKind::kQwen3);
  EXPECT_EQ(reference_template("llama3").kind(), ChatTemplateKind::kLlama3);
  EXPECT_EQ(reference_template("llama3_1").kind(), ChatTemplateKind::kLlama31);
  EXPECT_EQ(reference_template("llama3_2").kind(), ChatTemplateKind::kLlama32);
}

TEST(ChatTemplate, MatchesTransformers) {
  ASSERT_GE(reference()["conversations"].size(), 12u);
  std::map<std::string, std::size_t> compared;
  for (const json& expected : reference()["cases"]) {
    const std::string name = expected["template"].get<std::string>();
    const std::string conversation = expected["conversation"].get<std::string>();
    SCOPED_TRACE(name + " " + conversation + " " + expected["options"].dump());
    const std::vector<ChatMessage> messages = messages_of(reference()["conversations"][conversation]);
    const Expected<std::string> text = reference_template(name).render(messages, options_of(expected["options"]));
    ASSERT_TRUE(text.ok()) << text.status().message();
    EXPECT_EQ(*text, expected["text"].get<std::string>());
    ++compared[name];
  }
  for (const auto& [name, count] : compared) std::cout << name << ": " << count << " renderings compared\n";
  EXPECT_EQ(compared.size(), reference()["templates"].size());
}

std::string local_date() { return fmt::format("{:%d %b %Y}", fmt::localtime(std::time(nullptr))); }

// The reference pins Llama 3.2's date; left to the template, it is today's (strftime_now).
TEST(ChatTemplate, Llama32DatesTheSystemBlockToday) {
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"}};
  const std::string before = local_date();
  const std::string text = *reference_template("llama3_2").render(messages);
  const std::string after = local_date();
  EXPECT_TRUE(text.find("Today Date: " + before + "\n") != std::string::npos ||
              text.find("Today Date: " + after + "\n") != std::string::npos)
      << text;
}

// The tiny model fixtures carry the Qwen3 and Llama 3.1 templates in their tokenizer_config.json.
TEST(ChatTemplate, LoadsTheFixtureConfigs) {
  Expected<ChatTemplate> qwen3 = ChatTemplate::load(kSource / "tests/fixtures/qwen3-tiny/tokenizer_config.json");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status().message();
  EXPECT_EQ(qwen3->kind(), ChatTemplateKind::kQwen3);
  Expected<ChatTemplate> llama = ChatTemplate::load(kSource / "tests/fixtures/llama-tiny/tokenizer_config.json");
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_EQ(llama->kind(), ChatTemplateKind::kLlama31);
  // bos_token comes from the config.
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"}};
  EXPECT_EQ(llama->render(messages)->rfind("<|begin_of_text|><|start_header_id|>system", 0), 0u);
}

TEST(ChatTemplate, RenderErrorsNameTheMessage) {
  for (const char* name : {"qwen3", "llama3_1"}) {
    SCOPED_TRACE(name);
    const ChatTemplate chat = reference_template(name);
    EXPECT_EQ(chat.render({}).status().message(), "the conversation has no messages");
    const std::vector<ChatMessage> unknown = {{.role = "system", .content = "s"},
                                              {.role = "user", .content = "u"},
                                              {.role = "bot", .content = "b"}};
    EXPECT_EQ(chat.render(unknown).status().message(),
              "messages[2]: unknown role \"bot\" (expected system, user or assistant)");
    const std::vector<ChatMessage> tool = {{.role = "user", .content = "u"}, {.role = "tool", .content = "{}"}};
    EXPECT_EQ(chat.render(tool).status().message(),
              "messages[1]: role \"tool\" is not supported (tools are out of scope)");
    const std::vector<ChatMessage> capitalized = {{.role = "User", .content = "u"}};
    EXPECT_FALSE(chat.render(capitalized).ok());
  }
}

TEST(ChatTemplate, RecognizeErrorsNameTheSource) {
  EXPECT_EQ(ChatTemplate::recognize("{{ messages }}", "", "x/tokenizer_config.json").status().message(),
            "x/tokenizer_config.json: unrecognized chat template (neither Qwen3's ChatML with <|im_start|> nor "
            "Llama 3's with <|start_header_id|>)");
  const std::string qwen25 = "{%- for message in messages %}{{'<|im_start|>' + message.role}}{%- endfor %}";
  EXPECT_EQ(ChatTemplate::recognize(qwen25, "", "q.jinja").status().message(),
            "q.jinja: a ChatML chat template without Qwen3's enable_thinking switch (Qwen2.5's or "
            "Qwen3-Instruct-2507's?); only the Qwen3 and Llama 3 templates are supported");
}

// A folder of its own per case: a chat_template.jinja beside the config changes what loads.
std::filesystem::path config_in(const std::string& folder, const json& config) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("chat_template_" + folder);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir / "tokenizer_config.json";
}

TEST(ChatTemplate, LoadTakesEveryWayAConfigHoldsItsTemplate) {
  const std::string qwen3 = read_text(kSource / "tests/tokenizer/data/chat_templates/qwen3.jinja");
  const std::string llama = read_text(kSource / "tests/tokenizer/data/chat_templates/llama3_1.jinja");
  // A list of named templates: the model's own is "default".
  const json listed = {{"chat_template", json::array({json{{"name", "tool_use"}, {"template", llama}},
                                                      json{{"name", "default"}, {"template", qwen3}}})}};
  Expected<ChatTemplate> from_list = ChatTemplate::load(config_in("list", listed));
  ASSERT_TRUE(from_list.ok()) << from_list.status().message();
  EXPECT_EQ(from_list->kind(), ChatTemplateKind::kQwen3);
  // chat_template.jinja beside the config wins over its entry, as in transformers; bos_token may
  // be an object with "content".
  const json config = {{"chat_template", qwen3}, {"bos_token", {{"content", "<B>"}, {"special", true}}}};
  const std::filesystem::path path = config_in("jinja_file", config);
  std::ofstream(path.parent_path() / "chat_template.jinja") << llama;
  Expected<ChatTemplate> from_file = ChatTemplate::load(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  EXPECT_EQ(from_file->kind(), ChatTemplateKind::kLlama31);
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"}};
  EXPECT_EQ(from_file->render(messages)->rfind("<B><|start_header_id|>", 0), 0u);
}

TEST(ChatTemplate, LoadErrorsNameTheFile) {
  const std::string missing = ::testing::TempDir() + "chat_template_missing/tokenizer_config.json";
  EXPECT_EQ(ChatTemplate::load(missing).status().message(), missing + ": cannot open");
  const std::filesystem::path none = config_in("none", {{"bos_token", nullptr}});
  EXPECT_EQ(ChatTemplate::load(none).status().message(),
            none.string() + ": no \"chat_template\" (nor a chat_template.jinja beside it)");
  const std::filesystem::path number = config_in("number", {{"chat_template", 3}});
  EXPECT_EQ(ChatTemplate::load(number).status().message(),
            number.string() + ": \"chat_template\" is neither a string nor a list with a \"default\" template");
  const json rag_only = json::array({json{{"name", "rag"}, {"template", "x"}}});
  const std::filesystem::path no_default = config_in("no_default", {{"chat_template", rag_only}});
  EXPECT_FALSE(ChatTemplate::load(no_default).ok());
  const std::filesystem::path unknown = config_in("unknown", {{"chat_template", "{{ messages }}"}});
  const std::string unrecognized = ChatTemplate::load(unknown).status().message();
  EXPECT_EQ(unrecognized.rfind(unknown.string() + ": unrecognized chat template", 0), 0u) << unrecognized;
  const std::filesystem::path array = config_in("array", json::array());
  EXPECT_EQ(ChatTemplate::load(array).status().message(), array.string() + ": not a JSON object");
  const std::filesystem::path broken = config_in("broken", {});
  std::ofstream(broken) << "{\"chat_template\": ";
  const std::string message = ChatTemplate::load(broken).status().message();
  EXPECT_EQ(message.rfind(broken.string() + ": not valid JSON: ", 0), 0u) << message;
}

}  // namespace
}  // namespace evt::tokenizer
