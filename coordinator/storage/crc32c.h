// CRC32C (Castagnoli), the checksum of every record and metadata file.
// Implemented with Boost.CRC in crc32c.cc so that Boost stays out of headers.
#pragma once

#include <cstdint>
#include <string_view>

namespace pgfence::storage {

// CRC32C of `bytes` (init and final xor 0xFFFFFFFF, reflected):
// crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::string_view bytes);

}  // namespace pgfence::storage
