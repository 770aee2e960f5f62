#include "runtime/transport/transport_common.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::transport {
namespace {

using ::testing::HasSubstr;

TEST(CheckMetadataValue, AcceptsPrintableAsciiAndTheEmptyString) {
  EXPECT_TRUE(CheckMetadataValue("O.token", "abc-DEF_123 ~!").ok());
  EXPECT_TRUE(CheckMetadataValue("O.token", "").ok());
}

TEST(CheckMetadataValue, RefusesControlAndNonAsciiBytesNamingTheField) {
  for (const std::string bad : {std::string("a\nb"), std::string("tab\t"), std::string("\x7f"),
                                std::string("caf\xc3\xa9")}) {
    const absl::Status s = CheckMetadataValue("O.caller", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("O.caller: must be printable ASCII"));
  }
}

TEST(CheckStreamLimits, AcceptsTheDefaultsAndEachUpperBound) {
  EXPECT_TRUE(CheckStreamLimits("O", kDefaultChunkBytes, kDefaultFrameBytes, 1 << 20).ok());
  EXPECT_TRUE(CheckStreamLimits("O", int64_t{16} << 20, int64_t{32} << 20, kMaxPayloadBytes).ok());
}

TEST(CheckStreamLimits, RefusesEachLimitOutOfRangeNamingTheOptionsAndTheField) {
  struct Case {
    int64_t chunk, frame, request;
    const char* expected;
  };
  const Case cases[] = {
      {0, kDefaultFrameBytes, 1, "O.chunk_bytes is 0, must be in (0, 16 MiB]"},
      {(int64_t{16} << 20) + 1, kDefaultFrameBytes, 1, "O.chunk_bytes is 16777217"},
      {kDefaultChunkBytes, -1, 1, "O.frame_bytes is -1, must be in (0, 32 MiB]"},
      {kDefaultChunkBytes, (int64_t{32} << 20) + 1, 1, "O.frame_bytes is 33554433"},
      {kDefaultChunkBytes, kDefaultFrameBytes, 0,
       "O.max_request_bytes is 0, must be in (0, 2 GiB)"},
      {kDefaultChunkBytes, kDefaultFrameBytes, kMaxPayloadBytes + 1, "O.max_request_bytes is"},
  };
  for (const Case& c : cases) {
    const absl::Status s = CheckStreamLimits("O", c.chunk, c.frame, c.request);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace troupe::transport
