// The auth file parser on arbitrary bytes: it returns an error or a policy,
// never crashes, and a policy it returns answers lookups.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "auth/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    pgfence::auth::Policy p;
    if (!pgfence::auth::Policy::parse(text, p).empty()) return 0;
    pgfence::auth::BearerProblem why = pgfence::auth::BearerProblem::kNone;
    for (const pgfence::auth::User& u : p.users()) {
        (void)p.allowed(u, pgfence::auth::Permission::kLock, text.substr(0, 16));
        (void)p.holds_any(u, pgfence::auth::Permission::kRead);
        if (p.user_named(u.name) != &u) __builtin_trap();
    }
    (void)p.user_for_bearer(text.substr(0, 40), why);
    return 0;
}
