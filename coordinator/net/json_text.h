// Writing JSON text without a JSON DOM, for the hot-path answers and the
// HTTP server's own refusals.
#pragma once

#include <string>
#include <string_view>

namespace pgfence::net {

// Appends `text` as a JSON string literal: quoted, with '"' and '\' escaped
// and every control character below 0x20 as \u00XX. Other bytes are copied
// as they are: the caller passes UTF-8 (keys and owners are validated UTF-8
// without control characters, lock/validate.cc; error messages are ASCII).
void append_json_string(std::string& out, std::string_view text);

}  // namespace pgfence::net
