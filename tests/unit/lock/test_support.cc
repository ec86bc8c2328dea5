#include "test_support.h"

namespace pgfence::lock {
std::ostream& operator<<(std::ostream& os, const Result& result) {
    return os << describe(result);
}
std::ostream& operator<<(std::ostream& os, const Command& cmd) {
    return os << describe(cmd);
}
std::ostream& operator<<(std::ostream& os, const Lock& lock) {
    return os << describe(Command{Grant{lock.key, lock.lease_ms, lock.owner.str(), lock.user.str()}})
              << " token=" << lock.token << " value=" << lock.value << " remaining_ms=" << lock.remaining_ms;
}
}  // namespace pgfence::lock

namespace pgfence::lock::test {

void put_lock(Bytes& bytes, const Lock& lock, std::uint8_t version) {
    bytes.str(lock.key).u64(lock.token).u64(lock.lease_ms).str(lock.owner.str());
    if (version == 2) bytes.str(lock.user.str());
    if (version == 3) {
        const std::uint8_t flags = (lock.user.empty() ? 0 : 1) | (lock.value.empty() ? 0 : 2) |
                                   (lock.remaining_ms == 0 ? 0 : 4);
        bytes.u8(flags);
        if (flags & 1) bytes.str(lock.user.str());
        if (flags & 2) bytes.str(lock.value.str());
        if (flags & 4) bytes.u64(lock.remaining_ms);
    }
}

std::vector<std::string> key_pool() {
    return {"report:7", "report:8", "jobs/nightly", "ключ", "a", std::string(kMaxKeyBytes, 'k')};
}

namespace {

template <typename T>
T pick(std::mt19937_64& rng, T low, T high) {
    return std::uniform_int_distribution<T>(low, high)(rng);
}

Token random_token(std::mt19937_64& rng, const LockTable& table, const std::string& key) {
    const Lock* held = table.find(key);
    switch (pick(rng, 0, 3)) {
        case 0:
            return held ? held->token : 0;
        case 1:
            return held ? held->token - 1 : table.last_token();
        case 2:
            return table.last_token();
        default:
            return pick<Token>(rng, 0, table.last_token() + 2);
    }
}

}  // namespace

Command random_command(std::mt19937_64& rng, const std::vector<std::string>& keys,
                       const LockTable& table) {
    const std::string& key = keys[pick<std::size_t>(rng, 0, keys.size() - 1)];
    static const std::vector<std::string> owners = {"", "worker-a", "worker-b"};
    static const std::vector<std::string> users = {"", "", "ua", "uc"};
    static const std::vector<std::string> values = {"", "", "leader-a", "http://b:80"};
    switch (pick(rng, 0, 14)) {
        case 0:
        case 1:
        case 2:
        case 3: {
            std::string owner = owners[pick<std::size_t>(rng, 0, owners.size() - 1)];
            std::string user = users[pick<std::size_t>(rng, 0, users.size() - 1)];
            std::string value = values[pick<std::size_t>(rng, 0, values.size() - 1)];
            return Grant{key, pick<std::uint64_t>(rng, 1, 60'000), owner, user, value};
        }
        case 14:
            return Proclaim{key, random_token(rng, table, key), values[pick<std::size_t>(rng, 0, values.size() - 1)]};
        case 4:
        case 5:
            return Release{key, random_token(rng, table, key)};
        case 6:
            return Expire{key, random_token(rng, table, key)};
        case 7: {
            ExpireMany many;
            const std::size_t count = pick<std::size_t>(rng, 1, 4);
            for (std::size_t i = 0; i < count; ++i) {
                const std::string& k = keys[pick<std::size_t>(rng, 0, keys.size() - 1)];
                many.locks.push_back(Expire{k, random_token(rng, table, k)});
            }
            return many;
        }
        case 8:
            return SetTokenFloor{table.token_floor() + pick<Token>(rng, 0, 1000)};
        case 10:
        case 11: {
            // 2..4 keys, sometimes repeated (invalid: refused whole).
            GrantMany many{{}, pick<std::uint64_t>(rng, 1, 60'000),
                           owners[pick<std::size_t>(rng, 0, owners.size() - 1)],
                           users[pick<std::size_t>(rng, 0, users.size() - 1)]};
            const std::size_t count = pick<std::size_t>(rng, 2, 4);
            for (std::size_t i = 0; i < count; ++i) many.keys.push_back(keys[pick<std::size_t>(rng, 0, keys.size() - 1)]);
            return many;
        }
        case 12: {
            // The keys of the set of `key`'s holder (often), or of a random one.
            const Lock* held = table.find(key);
            ReleaseMany many{{}, random_token(rng, table, key)};
            if (held != nullptr && table.set_size(held->token) > 0 && pick(rng, 0, 2) > 0) {
                many.keys = table.set_keys(held->token);
                if (pick(rng, 0, 3) == 0) many.keys.pop_back();
            }
            while (many.keys.size() < 2) many.keys.push_back(keys[pick<std::size_t>(rng, 0, keys.size() - 1)]);
            return many;
        }
        case 13: {
            Checkpoint checkpoint;
            const std::size_t count = pick<std::size_t>(rng, 1, 4);
            for (std::size_t i = 0; i < count; ++i) {
                const std::string& k = keys[pick<std::size_t>(rng, 0, keys.size() - 1)];
                checkpoint.locks.push_back(LeaseCheckpoint{k, random_token(rng, table, k), pick<std::uint64_t>(rng, 0, 60'000)});
            }
            return checkpoint;
        }
        default:
            return SetTokenFloor{pick<Token>(rng, 0, table.token_floor())};  // never lowers
    }
}

std::string random_bytes(std::mt19937_64& rng, std::size_t max_bytes) {
    std::string out(pick<std::size_t>(rng, 0, max_bytes), '\0');
    for (char& c : out) c = static_cast<char>(pick(rng, 0, 255));
    return out;
}

std::string mutate(std::mt19937_64& rng, std::string valid) {
    const int edits = pick(rng, 1, 4);
    for (int i = 0; i < edits; ++i) {
        const std::size_t at = pick<std::size_t>(rng, 0, valid.size());
        const char byte = static_cast<char>(pick(rng, 0, 255));
        switch (pick(rng, 0, 2)) {
            case 0:
                if (at < valid.size()) valid[at] = byte;
                break;
            case 1:
                valid.insert(valid.begin() + static_cast<std::ptrdiff_t>(at), byte);
                break;
            default:
                if (at < valid.size()) valid.erase(at, 1);
                break;
        }
    }
    return valid;
}

}  // namespace pgfence::lock::test
