// fencectl's --help texts (kept in step with docs/cli.md).
#pragma once

#include <string>

namespace pgfence::cli {

// The overview for an empty `command`, else that command's page ("" if unknown).
std::string help_text(const std::string& command);

}  // namespace pgfence::cli
