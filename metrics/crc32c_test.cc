#include "metrics/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace troupe::metrics {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(Crc32c, OfNothingIsZero) { EXPECT_EQ(Crc32c(""), 0u); }

// The test vectors of RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, MatchesTheIscsiTestVectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendingEqualsHashingTheConcatenation) {
  EXPECT_EQ(ExtendCrc32c(Crc32c("1234"), "56789"), Crc32c("123456789"));
  EXPECT_EQ(ExtendCrc32c(Crc32c("123456789"), ""), Crc32c("123456789"));
}

TEST(Crc32c, MaskingRotatesAndAddsTheTfRecordDelta) {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8, worked by hand:
  //   0xE3069283 >> 15 = 0x0001C60D, << 17 = 0x25060000 (mod 2^32) -> 0x2507C60D + 0xA282EAD8.
  EXPECT_EQ(MaskCrc32c(0xE3069283u), 0xC78AB0E5u);
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
}

TEST(Crc32c, UnmaskingInvertsMasking) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u, 0x12345678u}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc) << crc;
  }
}

}  // namespace
}  // namespace troupe::metrics
