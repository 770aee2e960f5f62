// ChatTemplate against Python's Jinja2: every template in testdata/ × several conversations is
// rendered by ChatTemplate and by testdata/render_chat.py (the way transformers renders), and the
// bytes must be identical; error cases must fail on both sides with the same message.
#include "models/chat/chat_template.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kTestdata[] = "models/chat/testdata/";
constexpr char kPython[] = "/usr/bin/python3";
const absl::CivilSecond kNow(2025, 2, 3, 14, 5, 6);
constexpr char kNowIso[] = "2025-02-03T14:05:06";

struct Case {
  std::string name;
  std::string template_file;
  Json messages;
  Json tools = nullptr;
  bool add_generation_prompt = false;
  Json special_tokens = Json::object();
  Json extra = Json::object();
};

Json Msg(const std::string& role, const std::string& content) {
  return Json{{"role", role}, {"content", content}};
}

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "description": "Current weather in a city, in \"metric\" units.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "calc", "description": "Evaluate arithmetic",
      "parameters": {"type": "object", "properties": {"expr": {"type": "string"}},
        "required": ["expr"]}, "return": {"type": "number"}}}
  ])");
}

// The conversations every template can render.
std::vector<std::pair<std::string, Json>> PlainConversations(bool system) {
  std::vector<std::pair<std::string, Json>> out;
  out.emplace_back("single_user", Json::array({Msg("user", "Hello!")}));
  out.emplace_back("multi_turn", Json::array({Msg("user", "What is 2+2?"), Msg("assistant", "4."),
                                              Msg("user", "And 3+3?")}));
  out.emplace_back("unicode_quotes_newlines",
                   Json::array({Msg("user", "  Héllo wörld 世界 🎉\nHe said \"hi\" and 'bye'\\n\n"),
                                Msg("assistant", "Ça va? <b>&amp;</b>\t{{ not a tag }} {% x %}"),
                                Msg("user", "\"quoted\"\n\nlast line  ")}));
  // Python's whitespace beyond ASCII's (str.isspace: what trim / strip remove) around and inside
  // the messages, and look-alikes that are not whitespace (U+200B, U+FEFF, U+180E).
  const std::string ws =
      "\u00a0\u2003\u3000\u2028\u2029\u0085\v\f\x1c\x1d\x1e\x1f\u1680\u2000\u200a\u202f"
      "\u205f";
  out.emplace_back(
      "unicode_whitespace",
      Json::array(
          {Msg("user", ws + "Hello\u00a0world\u3000!" + ws),
           Msg("assistant", "\u3000\u2028<think>\u2003x\u00a0</think>\u2003Hi\u200b\u00a0" + ws),
           Msg("user", "\u200b\ufeff\u180e" + ws + "\u202fend\u205f\u00a0\u200b")}));
  if (system) {
    out.emplace_back("system", Json::array({Msg("system", "You are terse."), Msg("user", "Hi")}));
    out.emplace_back("system_unicode_whitespace",
                     Json::array({Msg("system", ws + "Be\u2003terse." + ws), Msg("user", ws)}));
    out.emplace_back(
        "system_multi_turn",
        Json::array({Msg("system", "Answer in French.\nBe polite."), Msg("user", "Good morning"),
                     Msg("assistant", "Bonjour !"), Msg("user", "Thanks")}));
  }
  return out;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  auto add = [&](const std::string& name, const std::string& file, Json messages, Json tools,
                 Json special, Json extra) {
    for (bool gen : {false, true}) {
      Case c;
      c.name = absl::StrCat(file, "/", name, gen ? "/gen" : "");
      c.template_file = file;
      c.messages = messages;
      c.tools = tools;
      c.add_generation_prompt = gen;
      c.special_tokens = special;
      c.extra = extra;
      cases.push_back(std::move(c));
    }
  };
  const Json none = nullptr;
  const Json no_extra = Json::object();
  const Json llama_tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
  const Json gemma_tokens = {{"bos_token", "<bos>"}, {"eos_token", "<eos>"}};
  const Json mistral_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const Json qwen_tokens = {{"bos_token", nullptr}, {"eos_token", "<|im_end|>"}};

  for (const auto& [name, msgs] : PlainConversations(true)) {
    add(name, "chatml.jinja", msgs, none, Json::object(), no_extra);
    add(name, "qwen2_5.jinja", msgs, none, qwen_tokens, no_extra);
    add(name, "llama3_1.jinja", msgs, none, llama_tokens, no_extra);
    add(name, "llama3_2.jinja", msgs, none, llama_tokens, no_extra);
    add(name, "gemma3.jinja", msgs, none, gemma_tokens, no_extra);
    add(name, "mistral_v0_3.jinja", msgs, none, mistral_tokens, no_extra);
    add(name, "qwen3.jinja", msgs, none, qwen_tokens, no_extra);
  }
  for (const auto& [name, msgs] : PlainConversations(false)) {
    add(name, "gemma2.jinja", msgs, none, gemma_tokens, no_extra);
  }

  // Tool calls and results (OpenAI-style messages, as transformers documents them).
  const Json tool_call = {
      {"type", "function"},
      {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Zürich"}, {"days", 2}}}}}};
  const Json qwen_tools_chat = Json::array(
      {Msg("system", "You can check the weather."), Msg("user", "Weather in Zürich and Paris?"),
       Json{{"role", "assistant"},
            {"content", ""},
            {"tool_calls", Json::array({tool_call, Json{{"type", "function"},
                                                        {"function",
                                                         {{"name", "get_weather"},
                                                          {"arguments", {{"city", "Paris"}}}}}}})}},
       Msg("tool", "{\"temp_c\": 3.5, \"sky\": \"fog\"}"), Msg("tool", "{\"temp_c\": 7}"),
       Msg("assistant", "Zürich 3.5 °C in fog, Paris 7 °C."), Msg("user", "Thanks")});
  add("tools", "qwen2_5.jinja", qwen_tools_chat, Tools(), qwen_tokens, no_extra);
  add("tools_no_system", "qwen2_5.jinja",
      Json::array(
          {Msg("user", "Compute 6*7"),
           Json{{"role", "assistant"},
                {"content", "Let me compute."},
                {"tool_calls",
                 Json::array({Json{
                     {"function", {{"name", "calc"}, {"arguments", "{\"expr\": \"6*7\"}"}}}}})}},
           Msg("tool", "42")}),
      Tools(), qwen_tokens, no_extra);

  add("tools", "qwen3.jinja", qwen_tools_chat, Tools(), qwen_tokens, no_extra);
  add("thinking", "qwen3.jinja",
      Json::array(
          {Msg("user", "Why is the sky blue?"),
           Msg("assistant", "<think>\nRayleigh scattering.\n</think>\n\nShort answer: scattering."),
           Msg("user", "More?"),
           Json{{"role", "assistant"},
                {"reasoning_content", "\nThink harder.\n"},
                {"content", "Blue light scatters more."}}}),
      none, qwen_tokens, Json{{"enable_thinking", false}});
  const Json llama_tools_chat =
      Json::array({Msg("system", "  Use tools when needed.  "), Msg("user", "Weather in Zürich?"),
                   Json{{"role", "assistant"}, {"tool_calls", Json::array({tool_call})}},
                   Json{{"role", "tool"}, {"content", "{\"temp_c\": 3.5}"}}, Msg("user", "Warm?")});
  for (const char* file : {"llama3_1.jinja", "llama3_2.jinja"}) {
    add("tools", file, llama_tools_chat, Tools(), llama_tokens, no_extra);
    add("tools_in_system", file, llama_tools_chat, Tools(), llama_tokens,
        Json{{"tools_in_user_message", false}});
    add("date_string", file, Json::array({Msg("user", "Date?")}), none, llama_tokens,
        Json{{"date_string", "01 Jan 2030"}});
  }
  add("builtin_tools", "llama3_1.jinja",
      Json::array({Msg("user", "Search the news"),
                   Json{{"role", "assistant"},
                        {"tool_calls",
                         Json::array({Json{{"function",
                                            {{"name", "brave_search"},
                                             {"arguments", {{"query", "news \"today\""}}}}}}})}},
                   Json{{"role", "ipython"}, {"content", {{"results", Json::array({1, 2.5})}}}}}),
      none, llama_tokens,
      Json{{"builtin_tools", Json::array({"brave_search", "code_interpreter", "wolfram_alpha"})}});

  add("multimodal_parts", "gemma3.jinja",
      Json::array(
          {Json{{"role", "system"},
                {"content", Json::array({Json{{"type", "text"}, {"text", "Be brief."}}})}},
           Json{{"role", "user"},
                {"content", Json::array({Json{{"type", "image"}},
                                         Json{{"type", "text"}, {"text", " What is it? "}}})}}}),
      none, gemma_tokens, no_extra);

  const Json mistral_call = {{"id", "abc123XYZ"},
                             {"type", "function"},
                             {"function", {{"name", "calc"}, {"arguments", {{"expr", "6*7"}}}}}};
  add("tools", "mistral_v0_3.jinja",
      Json::array({Msg("system", "Use tools."), Msg("user", "Compute 6*7"),
                   Json{{"role", "assistant"}, {"tool_calls", Json::array({mistral_call})}},
                   Json{{"role", "tool"}, {"tool_call_id", "abc123XYZ"}, {"content", "42"}},
                   Msg("assistant", "It is 42."), Msg("user", "Now 7*8?")}),
      Tools(), mistral_tokens, no_extra);
  return cases;
}

// Error cases: both sides must fail; ours ends with Python's message.
std::vector<Case> ErrorCases() {
  std::vector<Case> cases;
  const Json gemma_tokens = {{"bos_token", "<bos>"}};
  cases.push_back({"gemma2/system", "gemma2.jinja",
                   Json::array({Msg("system", "x"), Msg("user", "y")}), nullptr, true,
                   gemma_tokens});
  cases.push_back({"gemma2/not_alternating", "gemma2.jinja",
                   Json::array({Msg("user", "a"), Msg("user", "b")}), nullptr, true, gemma_tokens});
  cases.push_back({"gemma3/not_alternating", "gemma3.jinja",
                   Json::array({Msg("user", "a"), Msg("assistant", "b"), Msg("assistant", "c")}),
                   nullptr, false, gemma_tokens});
  cases.push_back(
      {"mistral/bad_tool_call_id", "mistral_v0_3.jinja",
       Json::array(
           {Msg("user", "a"),
            Json{{"role", "assistant"},
                 {"tool_calls",
                  Json::array(
                      {Json{{"id", "short"},
                            {"function", {{"name", "calc"}, {"arguments", Json::object()}}}}})}}}),
       nullptr, false, Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}});
  cases.push_back(
      {"llama3_1/two_tool_calls", "llama3_1.jinja",
       Json::array(
           {Msg("user", "a"),
            Json{{"role", "assistant"},
                 {"tool_calls",
                  Json::array(
                      {Json{{"function", {{"name", "f"}, {"arguments", Json::object()}}}},
                       Json{{"function", {{"name", "g"}, {"arguments", Json::object()}}}}})}}}),
       nullptr, false, Json{{"bos_token", "<|begin_of_text|>"}}});
  return cases;
}

Json ToPython(const Case& c) {
  return Json{{"template", absl::StrCat(kTestdata, c.template_file)},
              {"messages", c.messages},
              {"tools", c.tools},
              {"add_generation_prompt", c.add_generation_prompt},
              {"special_tokens", c.special_tokens},
              {"extra", c.extra},
              {"now", kNowIso}};
}

// Runs render_chat.py on the cases; fails the test when Python or Jinja2 is missing.
std::vector<Json> RenderWithPython(const std::vector<Case>& cases) {
  if (access(kPython, X_OK) != 0) {
    ADD_FAILURE() << kPython << " is missing: run tools/install_deps.sh (python3 python3-jinja2)";
    return {};
  }
  test::TempDir tmp("chat_cases");
  const std::string path = tmp.Path("cases.json");
  Json all = Json::array();
  for (const Case& c : cases) all.push_back(ToPython(c));
  test::WriteFile(path, all.dump());
  const std::string cmd = absl::StrCat(kPython, " ", kTestdata, "render_chat.py ", path, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return {};
  }
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int rc = pclose(pipe);
  if (rc != 0) {
    ADD_FAILURE() << "render_chat.py failed (exit " << WEXITSTATUS(rc) << "): " << output
                  << (WEXITSTATUS(rc) == 3 ? ""
                                           : "\nIf Jinja2 is missing, run tools/install_deps.sh");
    return {};
  }
  Json results = Json::parse(output, nullptr, false);
  if (!results.is_array() || results.size() != cases.size()) {
    ADD_FAILURE() << "unexpected output of render_chat.py: " << output.substr(0, 2000);
    return {};
  }
  return std::vector<Json>(results.begin(), results.end());
}

absl::StatusOr<std::string> RenderWithTroupe(const Case& c) {
  absl::StatusOr<ChatTemplate> chat =
      ChatTemplate::FromTemplateFile(absl::StrCat(kTestdata, c.template_file));
  if (!chat.ok()) return chat.status();
  Json extra = c.special_tokens;
  for (const auto& [k, v] : c.extra.items()) extra[k] = v;
  jinja::RenderOptions options;
  options.now = kNow;
  return chat->Render(c.messages, c.add_generation_prompt, c.tools, extra, options);
}

TEST(ChatTemplate, RendersTheSameBytesAsPythonJinja2) {
  const std::vector<Case> cases = AllCases();
  const std::vector<Json> expected = RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size());
  int compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    ASSERT_TRUE(expected[i]["ok"].get<bool>()) << "python: " << expected[i]["error"];
    absl::StatusOr<std::string> ours = RenderWithTroupe(cases[i]);
    ASSERT_TRUE(ours.ok()) << ours.status();
    EXPECT_EQ(*ours, expected[i]["text"].get<std::string>());
    ++compared;
  }
  std::printf("compared %d renders byte for byte\n", compared);
}

TEST(ChatTemplate, FailsWhereJinja2FailsWithTheTemplatesMessage) {
  const std::vector<Case> cases = ErrorCases();
  const std::vector<Json> expected = RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    ASSERT_FALSE(expected[i]["ok"].get<bool>());
    absl::StatusOr<std::string> ours = RenderWithTroupe(cases[i]);
    ASSERT_FALSE(ours.ok());
    EXPECT_EQ(ours.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::EndsWith(ours.status().message(), expected[i]["error"].get<std::string>()))
        << ours.status() << " vs python: " << expected[i]["error"];
  }
}

TEST(ChatTemplate, GemmaRefusesNonAlternatingRolesWithItsMessage) {
  absl::StatusOr<ChatTemplate> chat =
      ChatTemplate::FromTemplateFile(absl::StrCat(kTestdata, "gemma2.jinja"));
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<std::string> out =
      chat->Render(Json::array({Msg("user", "a"), Msg("user", "b")}), true);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            absl::StrCat(kTestdata,
                         "gemma2.jinja:1: Conversation roles must alternate "
                         "user/assistant/user/assistant/..."));
}

TEST(ChatTemplate, LoadsTokenizerConfigWithSpecialTokensAndNamedTemplates) {
  const nlohmann::json config = nlohmann::json::parse(R"({
    "bos_token": {"content": "<s>", "lstrip": false},
    "eos_token": "</s>",
    "chat_template": [
      {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"},
      {"name": "tool_use", "template": "TOOLS {{ tools | length }}"}
    ]})");
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromTokenizerConfig(config, "cfg.json");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->bos_token(), "<s>");
  EXPECT_EQ(chat->eos_token(), "</s>");
  const Json messages = Json::array({Msg("user", "hi")});
  EXPECT_EQ(*chat->Render(messages, false), "<s>[user]hi</s>");
  EXPECT_EQ(*chat->Render(messages, false, Tools()), "TOOLS 2");
  EXPECT_EQ(*chat->Render(messages, false, nullptr, Json{{"eos_token", "<END>"}}),
            "<s>[user]hi<END>");
}

TEST(ChatTemplate, RefusesConfigsWithoutAUsableTemplate) {
  auto no_template =
      ChatTemplate::FromTokenizerConfig(nlohmann::json{{"eos_token", "x"}}, "a.json");
  EXPECT_FALSE(no_template.ok());
  EXPECT_TRUE(absl::StrContains(no_template.status().message(), "a.json: no chat_template"));
  auto no_default = ChatTemplate::FromTokenizerConfig(
      nlohmann::json::parse(R"({"chat_template": [{"name": "rag", "template": "x"}]})"), "b.json");
  EXPECT_FALSE(no_default.ok());
  EXPECT_TRUE(absl::StrContains(no_default.status().message(), "no \"default\" entry (has: rag)"));
  auto bad_syntax = ChatTemplate::FromTokenizerConfig(
      nlohmann::json::parse(R"({"chat_template": "line1\n{% if x %}"})"), "c.json");
  EXPECT_FALSE(bad_syntax.ok());
  EXPECT_TRUE(absl::StrContains(bad_syntax.status().message(), "c.json#chat_template[default]:2:"))
      << bad_syntax.status();
  EXPECT_EQ(
      ChatTemplate::FromTokenizerConfigFile("/nonexistent/tokenizer_config.json").status().code(),
      absl::StatusCode::kNotFound);
}

TEST(ChatTemplate, ValidatesMessagesNamingTheIndex) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromString("{{ messages | length }}", "t");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(*chat->Render(Json::array({Msg("user", "a")}), false), "1");
  EXPECT_EQ(chat->Render(Json::object(), false).status().message(),
            "messages must be a JSON array");
  EXPECT_EQ(chat->Render(Json::array({Msg("user", "a"), Json{{"content", "b"}}}), false)
                .status()
                .message(),
            "messages[1] has no string \"role\"");
  EXPECT_EQ(chat->Render(Json::array({Json{{"role", 3}}}), false).status().message(),
            "messages[0] has no string \"role\"");
  EXPECT_EQ(chat->Render(Json::array({"user"}), false).status().message(),
            "messages[0] is not an object");
  EXPECT_EQ(chat->Render(Json::array(), false, Json{{"a", 1}}).status().message(),
            "tools must be null or a JSON array");
}

}  // namespace
}  // namespace troupe::models
