#include "scripts.h"

#include <boost/json.hpp>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "client/http_connection.h"

namespace pgfence::bench {
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kLeaseMs = 10'000;  // pgfence lease per acquire
constexpr std::int64_t kEtcdTtlS = 600;     // etcd lease, granted once per connection
constexpr auto kSetupTimeout = std::chrono::seconds(5);

// Round-robin over the endpoints from connection i's own start.
class Endpoints {
  public:
    Endpoints(const std::vector<client::Endpoint>& all, int connection)
        : all_(all), next_(static_cast<std::size_t>(connection) % all.size()) {}
    client::Endpoint next() {
        const client::Endpoint& e = all_[next_];
        next_ = (next_ + 1) % all_.size();
        return e;
    }

  private:
    std::vector<client::Endpoint> all_;
    std::size_t next_;
};

std::optional<json::object> parse_object(std::string_view body) {
    boost::system::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec || !v.is_object()) return std::nullopt;
    return std::move(v.get_object());
}

class PgfenceScript final : public Script {
  public:
    PgfenceScript(const std::vector<client::Endpoint>& endpoints, int connection, std::string key)
        : endpoints_(endpoints, connection), key_(std::move(key)) {}

    client::Endpoint endpoint() override { return endpoints_.next(); }
    // The key as owner: an acquire retried after an error whose grant did
    // apply gets its token back instead of 409 for the rest of the lease
    // (etcd's lock, under the connection's lease, re-enters the same way).
    Request acquire() override {
        return {"/v1/acquire", json::serialize(json::object{
                                   {"key", key_}, {"lease_ms", kLeaseMs}, {"owner", key_}})};
    }
    Request release() override {
        return {"/v1/release", json::serialize(json::object{{"key", key_}, {"token", token_}})};
    }
    std::string acquired(std::string_view body) override {
        const auto o = parse_object(body);
        const json::value* t = o ? o->if_contains("token") : nullptr;
        if (t == nullptr || !t->is_int64() || t->as_int64() < 1)
            return "acquire: no token in " + std::string(body);
        token_ = static_cast<std::uint64_t>(t->as_int64());
        return {};
    }
    std::string released(std::string_view body) override {
        const auto o = parse_object(body);
        const json::value* r = o ? o->if_contains("released") : nullptr;
        if (r == nullptr || !r->is_bool() || !r->as_bool())
            return "release: not released: " + std::string(body);
        return {};
    }

  private:
    Endpoints endpoints_;
    std::string key_;
    std::uint64_t token_ = 0;
};

class EtcdScript final : public Script {
  public:
    EtcdScript(const std::vector<client::Endpoint>& endpoints, int connection,
               const std::string& key, std::shared_ptr<const client::ConnectionSettings> settings)
        : endpoints_(endpoints, connection), name_(base64(key)) {
        const client::Endpoint at = endpoints_.next();
        client::HttpConnection conn(at, std::move(settings));
        const auto r = conn.roundtrip(
            {"POST", "/v3/lease/grant", json::serialize(json::object{{"TTL", kEtcdTtlS}})},
            client::Clock::now() + kSetupTimeout);
        if (r.error != client::TransportError::kNone || r.response.status != 200) {
            throw std::runtime_error(
                "etcd lease grant at " + at.to_string() + " failed: " +
                (r.error != client::TransportError::kNone ? r.message : r.response.body));
        }
        const auto o = parse_object(r.response.body);
        const json::value* id = o ? o->if_contains("ID") : nullptr;
        if (id == nullptr || !id->is_string())
            throw std::runtime_error("etcd lease grant: no ID in " + r.response.body);
        lease_id_ = std::string(id->as_string());
        first_ = at;
    }

    client::Endpoint endpoint() override {
        if (first_) {
            client::Endpoint e = *first_;
            first_.reset();
            return e;
        }
        return endpoints_.next();
    }
    Request acquire() override {
        return {"/v3/lock/lock",
                json::serialize(json::object{{"name", name_}, {"lease", lease_id_}})};
    }
    Request release() override {
        return {"/v3/lock/unlock", json::serialize(json::object{{"key", lock_key_}})};
    }
    std::string acquired(std::string_view body) override {
        const auto o = parse_object(body);
        const json::value* k = o ? o->if_contains("key") : nullptr;
        if (k == nullptr || !k->is_string()) return "lock: no key in " + std::string(body);
        lock_key_ = std::string(k->as_string());
        return {};
    }
    std::string released(std::string_view body) override {
        return parse_object(body) ? std::string()
                                  : "unlock: not a JSON object: " + std::string(body);
    }

  private:
    Endpoints endpoints_;
    std::optional<client::Endpoint> first_;
    std::string name_, lease_id_, lock_key_;
};

}  // namespace

std::string base64(const std::string& in) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                           (static_cast<unsigned char>(in[i + 1]) << 8) |
                           static_cast<unsigned char>(in[i + 2]);
        for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
    }
    if (i < in.size()) {
        unsigned v = static_cast<unsigned char>(in[i]) << 16;
        if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::unique_ptr<Script> make_pgfence_script(const std::vector<client::Endpoint>& endpoints,
                                            int connection, const std::string& key) {
    return std::make_unique<PgfenceScript>(endpoints, connection, key);
}

std::unique_ptr<Script> make_etcd_script(const std::vector<client::Endpoint>& endpoints,
                                         int connection, const std::string& key,
                                         std::shared_ptr<const client::ConnectionSettings> settings) {
    return std::make_unique<EtcdScript>(endpoints, connection, key, std::move(settings));
}

}  // namespace pgfence::bench
