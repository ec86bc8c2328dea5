#include "cli/output.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <ctime>

#include "client/duration.h"

namespace pgfence::cli {

std::string utc_text(std::int64_t unix_ms, bool millis) {
    const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char buf[48];
    if (millis) {
        std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ms % 1000));
    } else {
        std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    return buf;
}
namespace json = boost::json;

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> width(header.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    measure(header);
    for (const auto& row : rows) measure(row);
    auto print = [&](const std::vector<std::string>& row) {
        std::string line;
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
        }
        out << line << '\n';
    };
    print(header);
    for (const auto& row : rows) print(row);
}

std::string lock_json(const client::LockInfo& lock) {
    return json::serialize(json::object{{"key", lock.key},
                                        {"token", lock.token},
                                        {"owner", lock.owner},
                                        {"lease_ms", lock.lease.count()},
                                        {"ttl_ms", lock.ttl.count()},
                                        {"kid", lock.kid}});
}

std::string lease_json(const client::Lease& lease) {
    json::object o{
        {"key", lease.key}, {"token", lease.token}, {"lease_ms", lease.lease.count()}, {"owner", lease.owner}};
    if (lease.keys.size() > 1) {  // a set: its keys, and a proof per key
        json::array keys;
        for (const std::string& k : lease.keys) keys.emplace_back(k);
        o.erase("key");
        o["keys"] = std::move(keys);
        if (!lease.proofs.empty()) {
            json::object proofs;
            for (std::size_t i = 0; i < lease.keys.size() && i < lease.proofs.size(); ++i) {
                proofs[lease.keys[i]] = lease.proofs[i];
            }
            o["proofs"] = std::move(proofs);
        }
        return json::serialize(o);
    }
    if (!lease.proof.empty()) o["proof"] = lease.proof;
    return json::serialize(o);
}

const std::vector<std::string>& lock_header() {
    static const std::vector<std::string> kHeader{"KEY", "TOKEN", "OWNER", "LEASE", "TTL", "KID"};
    return kHeader;
}

std::vector<std::string> lock_row(const client::LockInfo& lock) {
    return {lock.key, std::to_string(lock.token), lock.owner.empty() ? "-" : lock.owner,
            client::format_duration(lock.lease), std::to_string(lock.ttl.count()) + "ms",
            lock.kid.empty() ? "-" : lock.kid};
}

std::string unreachable_json(const std::string& endpoint, const std::string& role, const std::string& error) {
    return json::serialize(json::object{{"endpoint", endpoint}, {"role", role}, {"error", error}});
}

}  // namespace pgfence::cli
