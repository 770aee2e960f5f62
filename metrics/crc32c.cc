#include "metrics/crc32c.h"

#include <array>

namespace troupe::metrics {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed.
constexpr uint32_t kMaskDelta = 0xa282ead8u;

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ kPolynomial : crc >> 1;
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

}  // namespace

uint32_t ExtendCrc32c(uint32_t crc, absl::string_view data) {
  uint32_t state = ~crc;
  for (unsigned char byte : data) state = kTable[(state ^ byte) & 0xFF] ^ (state >> 8);
  return ~state;
}

uint32_t Crc32c(absl::string_view data) { return ExtendCrc32c(0, data); }

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace troupe::metrics
