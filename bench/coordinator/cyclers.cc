#include "cyclers.h"

#include <boost/json.hpp>
#include <stdexcept>

#include "client/client.h"
#include "client/http_connection.h"

namespace pgfence::bench {
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

constexpr auto kLease = 10s;           // pgfence lease per acquire
constexpr std::int64_t kEtcdTtlS = 600;  // etcd lease, granted once per connection
constexpr auto kRequestTimeout = 5s;

class PgfenceCycler final : public Cycler {
public:
    PgfenceCycler(const std::vector<client::Endpoint>& endpoints, std::string key)
        : client_(options(endpoints)), key_(std::move(key)) {}

    bool acquire() override {
        auto r = client_.acquire({key_, kLease, 0ms, ""});
        if (!r) return note(r.error().message);
        token_ = r.value().token;
        return true;
    }
    bool release() override {
        auto r = client_.release(key_, token_);
        return r ? true : note(r.error().message);
    }
    std::string last_error() const override { return error_; }

private:
    static client::Options options(const std::vector<client::Endpoint>& endpoints) {
        client::Options o;
        o.endpoints = endpoints;
        o.timeout = kRequestTimeout;
        return o;
    }
    bool note(const std::string& e) {
        error_ = e;
        return false;
    }
    client::Client client_;
    std::string key_;
    std::uint64_t token_ = 0;
    std::string error_;
};

class EtcdCycler final : public Cycler {
public:
    EtcdCycler(const client::Endpoint& endpoint, std::string key) : conn_(endpoint), name_(base64(key)) {
        const auto r = post("/v3/lease/grant", json::object{{"TTL", kEtcdTtlS}});
        if (!r || !r->contains("ID")) throw std::runtime_error("etcd lease grant failed: " + error_);
        lease_id_ = json::value_to<std::string>(r->at("ID"));
    }

    bool acquire() override {
        const auto r = post("/v3/lock/lock", json::object{{"name", name_}, {"lease", lease_id_}});
        if (!r || !r->contains("key")) return false;
        lock_key_ = json::value_to<std::string>(r->at("key"));
        return true;
    }
    bool release() override { return post("/v3/lock/unlock", json::object{{"key", lock_key_}}).has_value(); }
    std::string last_error() const override { return error_; }

private:
    std::optional<json::object> post(const std::string& path, const json::object& body) {
        const auto r = conn_.roundtrip({"POST", path, json::serialize(body)}, client::Clock::now() + kRequestTimeout);
        if (r.error != client::TransportError::kNone) return fail(path + ": " + r.message);
        if (r.response.status != 200) return fail(path + ": HTTP " + std::to_string(r.response.status) + " " + r.response.body);
        boost::system::error_code ec;
        json::value v = json::parse(r.response.body, ec);
        if (ec || !v.is_object()) return fail(path + ": not a JSON object: " + r.response.body);
        return std::move(v.get_object());
    }
    std::optional<json::object> fail(std::string e) {
        error_ = std::move(e);
        return std::nullopt;
    }

    client::HttpConnection conn_;
    std::string name_, lease_id_, lock_key_, error_;
};

}  // namespace

std::string base64(const std::string& in) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
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

std::unique_ptr<Cycler> make_pgfence_cycler(const std::vector<client::Endpoint>& endpoints, const std::string& key) {
    return std::make_unique<PgfenceCycler>(endpoints, key);
}

std::unique_ptr<Cycler> make_etcd_cycler(const client::Endpoint& endpoint, const std::string& key) {
    return std::make_unique<EtcdCycler>(endpoint, key);
}

}  // namespace pgfence::bench
