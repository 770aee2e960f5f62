// CRC-32C (Castagnoli), the checksum of TFRecord files (TensorBoard event files), and the
// "masked" form TFRecord stores so that a CRC over data that itself contains CRCs stays strong.
//
//   uint32_t crc = Crc32c("123456789");              // 0xE3069283
//   uint32_t stored = MaskCrc32c(crc);               // what a TFRecord file holds
//   crc = ExtendCrc32c(Crc32c("1234"), "56789");     // same as Crc32c("123456789")
//
// Table-driven (one byte per step, reflected polynomial 0x82F63B78); the table is built at compile
// time. Thread-safety: pure functions, safe from any thread.
#ifndef TROUPE_METRICS_CRC32C_H_
#define TROUPE_METRICS_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace troupe::metrics {

// CRC-32C of `data` (initial value and final xor 0xFFFFFFFF, as in iSCSI / RFC 3720).
uint32_t Crc32c(absl::string_view data);

// CRC-32C of the concatenation of the bytes `crc` was computed over and `data`.
uint32_t ExtendCrc32c(uint32_t crc, absl::string_view data);

// TFRecord's masking: rotate right by 15 bits, add 0xa282ead8 (mod 2^32).
uint32_t MaskCrc32c(uint32_t crc);

// Inverse of MaskCrc32c.
uint32_t UnmaskCrc32c(uint32_t masked);

}  // namespace troupe::metrics

#endif  // TROUPE_METRICS_CRC32C_H_
