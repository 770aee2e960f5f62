#include "cli/did_you_mean.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("run", "run"), 0);
  EXPECT_EQ(EditDistance("", "run"), 3);
  EXPECT_EQ(EditDistance("run", ""), 3);
  EXPECT_EQ(EditDistance("resme", "resume"), 1);    // insertion
  EXPECT_EQ(EditDistance("statuss", "status"), 1);  // deletion
  EXPECT_EQ(EditDistance("stap", "stop"), 1);       // substitution
  EXPECT_EQ(EditDistance("statsu", "status"), 1);   // adjacent swap
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(EditDistance, IsSymmetric) {
  EXPECT_EQ(EditDistance("tokenzier", "tokenizer"), EditDistance("tokenizer", "tokenzier"));
  EXPECT_EQ(EditDistance("abc", "ca"), EditDistance("ca", "abc"));
}

const std::vector<std::string> kCommands = {"version", "doctor", "start", "status",
                                            "stop",    "job",    "run",   "tokenizer"};

TEST(DidYouMean, NamesTheClosestCommand) {
  EXPECT_EQ(DidYouMean("statsu", kCommands), "status");
  EXPECT_EQ(DidYouMean("stpo", kCommands), "stop");
  EXPECT_EQ(DidYouMean("tokeniser", kCommands), "tokenizer");
  EXPECT_EQ(DidYouMean("verison", kCommands), "version");
  EXPECT_EQ(DidYouMean("rnu", kCommands), "run");
}

TEST(DidYouMean, NamesTheClosestFlag) {
  const std::vector<std::string> flags = {"--help", "--resume", "--overwrite", "--address",
                                          "--log-level"};
  EXPECT_EQ(DidYouMean("--resme", flags), "--resume");
  EXPECT_EQ(DidYouMean("--adress", flags), "--address");
  EXPECT_EQ(DidYouMean("--loglevel", flags), "--log-level");
  EXPECT_EQ(DidYouMean("--overwirte", flags), "--overwrite");
}

TEST(DidYouMean, SaysNothingWhenNothingIsClose) {
  EXPECT_EQ(DidYouMean("frobnicate", kCommands), std::nullopt);
  EXPECT_EQ(DidYouMean("x", kCommands), std::nullopt);
  EXPECT_EQ(DidYouMean("", kCommands), std::nullopt);
  EXPECT_EQ(DidYouMean("statsu", {}), std::nullopt);
}

TEST(DidYouMean, SaysNothingForANameThatIsKnown) {
  EXPECT_EQ(DidYouMean("status", kCommands), std::nullopt);
}

TEST(DidYouMean, TheThresholdGrowsWithTheLengthOfTheWord) {
  // Three edits are too many for a six-letter word, enough for a nine-letter one.
  EXPECT_EQ(DidYouMean("sxaxux", {"status"}), std::nullopt);
  EXPECT_EQ(DidYouMean("tkoenxzre", {"tokenizer"}), "tokenizer");
}

TEST(DidYouMean, OnATiePrefersTheEarliestCandidate) {
  EXPECT_EQ(DidYouMean("stat", {"start", "state"}), "start");
}

}  // namespace
}  // namespace troupe
