// How the simulation reports a broken invariant: it throws SimFailure with a
// sentence saying what was wrong, with the values; the cluster runner catches
// it and prints the seed, member count and step that reproduce it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace pgfence::sim {

struct SimFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Builds a message from any streamable parts: fail("term ", t, " has two leaders").
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    throw SimFailure(out.str());
}

// Throws when `ok` is false; the message is only built on failure.
template <typename... Parts>
void require(bool ok, const Parts&... parts) {
    if (!ok) fail(parts...);
}

}  // namespace pgfence::sim
