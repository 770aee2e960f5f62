// The verdict accuracy of an arithmetic judge through the Judge actor's own code (actors/judge.h:
// template, continuous batching, parsing), on examples/make_arith_judge.py's held-out records
// ({"prompt": "23+58=81|", "response": "Y"} or, with --reasoning, "81=Y"). Each record becomes a
// sample (prompt "23+58=", response "81") judged with the template "{prompt}{response}|"; the
// verdict is compared with the record's. Reports the share right, the share of replies that are
// no verdict, and both by kind of answer (right; wrong with the same number of digits, which
// holds the off-by-one digits; wrong with another length).
//
//   bazel run -c opt //bench:judge_eval -- --judge runs/judge-arith/judge
//       --records runs/judge-arith/data/judge_val.jsonl [--marker =]
//
// Output: JSON lines on stdout; a summary on stderr.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "actors/judge.h"
#include "models/compute_threads.h"
#include "nlohmann/json.hpp"
#include "proto/actor_config.pb.h"

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "judge_eval: %s\n", what.c_str());
  std::exit(1);
}

struct Tally {
  int total = 0, right = 0, unparsed = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string judge, records, marker;
  CLI::App app{"An arithmetic judge's verdict accuracy through the Judge actor's code"};
  app.add_option("--judge", judge, "the judge model's directory")->required();
  app.add_option("--records", records, "make_arith_judge.py's held-out JSONL")->required();
  app.add_option("--marker", marker, "read the verdict after this (reward.judge.marker)");
  CLI11_PARSE(app, argc, argv);
  // `bazel run` starts the program in its runfiles: read the paths from where it was typed.
  if (const char* typed_in = std::getenv("BUILD_WORKING_DIRECTORY"); typed_in != nullptr) {
    if (chdir(typed_in) != 0) Die(std::string("cannot enter ") + typed_in);
  }
  troupe::models::SetComputeThreads(1);

  troupe::proto::JudgeConfig config;
  config.set_model_dir(judge);
  config.set_template_("{prompt}{response}|");
  (*config.mutable_verdicts())["Y"] = 1.0;
  (*config.mutable_verdicts())["N"] = 0.0;
  config.set_max_new_tokens(8);
  config.set_slots(64);
  if (!marker.empty()) config.set_marker(marker);
  absl::StatusOr<std::unique_ptr<troupe::actors::JudgeCore>> core =
      troupe::actors::JudgeCore::Create(config);
  if (!core.ok()) Die(std::string(core.status().message()));

  std::ifstream in(records);
  if (!in) Die("cannot read " + records);
  troupe::proto::ScoreRequest req;
  troupe::proto::SampleGroup* group = req.add_groups();
  std::vector<std::string> kinds;
  std::vector<bool> expected_yes;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    const std::string where = absl::StrCat(records, ":", number);
    if (!r.is_object() || !r.contains("prompt") || !r.contains("response")) {
      Die(where + ": expected {\"prompt\", \"response\"}");
    }
    const std::string text = r["prompt"].get<std::string>();
    const std::string verdict = r["response"].get<std::string>();
    const size_t eq = text.find('=');
    if (eq == std::string::npos || text.empty() || text.back() != '|' || verdict.empty()) {
      Die(where + ": not a judge record (\"a+b=c|\" -> \"Y\" / \"N\")");
    }
    troupe::proto::Sample* s = group->add_samples();
    s->set_prompt_text(text.substr(0, eq + 1));
    const std::string answer = text.substr(eq + 1, text.size() - eq - 2);
    s->set_response_text(answer);
    const bool yes = verdict.back() == 'Y';
    expected_yes.push_back(yes);
    const std::string lhs = text.substr(0, eq);
    const size_t plus = lhs.find('+');
    const std::string sum =
        std::to_string(std::stoi(lhs.substr(0, plus)) + std::stoi(lhs.substr(plus + 1)));
    kinds.push_back(yes                           ? "right"
                    : answer.size() == sum.size() ? "wrong, same length"
                                                  : "wrong, other length");
  }
  if (kinds.empty()) Die(records + ": no records");

  std::atomic<bool> stop{false};
  std::thread server([&] { (void)(*core)->Serve([&] { return stop.load(); }); });
  absl::StatusOr<troupe::proto::ScoreReply> reply = (*core)->Score(req).Get(absl::Minutes(30));
  stop = true;
  server.join();
  if (!reply.ok()) Die(std::string(reply.status().message()));

  std::map<std::string, Tally> by_kind;
  Tally all;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const troupe::proto::Sample& s = reply->groups(0).samples(static_cast<int>(i));
    for (Tally* t : {&all, &by_kind[kinds[i]]}) {
      ++t->total;
      if (!s.reward_error().empty()) {
        ++t->unparsed;
      } else if ((s.reward() > 0.5f) == expected_yes[i]) {
        ++t->right;
      }
    }
  }
  auto print = [&](const std::string& kind, const Tally& t) {
    std::printf(
        "{\"bench\": \"judge_eval\", \"metric\": \"verdict_accuracy\", \"value\": %.4f, \"unit\": "
        "\"fraction\", \"kind\": \"%s\", \"records\": %d, \"no_verdict\": %d, \"judge\": \"%s\"}\n",
        1.0 * t.right / t.total, kind.c_str(), t.total, t.unparsed, judge.c_str());
    std::fprintf(stderr, "judge_eval: %-20s %5.1f%% right (%d/%d), %d replies no verdict\n",
                 kind.c_str(), 100.0 * t.right / t.total, t.right, t.total, t.unparsed);
  };
  print("all", all);
  for (const auto& [kind, t] : by_kind) print(kind, t);
  return 0;
}
