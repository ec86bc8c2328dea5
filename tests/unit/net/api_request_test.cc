// HTTP request validation: every bad field is named in the message.
#include <boost/test/unit_test.hpp>

#include "net/api_request.h"

using namespace pgfence::net;

namespace {
const RequestLimits kLimits{1000, 60000, 30000};

std::string acquire_error(const std::string& body) {
    auto r = parse_acquire(body, kLimits);
    return std::holds_alternative<BadRequest>(r) ? std::get<BadRequest>(r).message : "";
}
}  // namespace

BOOST_AUTO_TEST_SUITE(api_request)

BOOST_AUTO_TEST_CASE(valid_acquire_parses_with_defaults) {
    auto r = parse_acquire(R"({"key":"report:7","lease_ms":5000})", kLimits);
    BOOST_REQUIRE(std::holds_alternative<AcquireRequest>(r));
    BOOST_TEST(std::get<AcquireRequest>(r).key == "report:7");
    BOOST_TEST(std::get<AcquireRequest>(r).lease_ms == 5000u);
    BOOST_TEST(std::get<AcquireRequest>(r).wait_ms == 0u);
    BOOST_TEST(std::get<AcquireRequest>(r).owner.empty());
}

BOOST_AUTO_TEST_CASE(malformed_json_and_non_object_are_refused) {
    BOOST_TEST(acquire_error(R"({"key":)").find("not valid JSON") != std::string::npos);
    BOOST_TEST(acquire_error("[1,2]").find("JSON object") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(missing_and_wrong_typed_fields_are_named) {
    BOOST_TEST(acquire_error(R"({"lease_ms":5000})").find("'key' is required") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k"})").find("'lease_ms' is required") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":5,"lease_ms":5000})").find("'key' must be a string") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":"5000"})").find("'lease_ms' must be") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":5000.5})").find("'lease_ms' must be") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":-1})").find("'lease_ms' must not be negative") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":5000,"owner":7})").find("'owner' must be a string") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":5000,"wait_ms":true})").find("'wait_ms'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(out_of_range_values_are_refused_with_the_bounds) {
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":999})").find("[1000, 60000]") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":60001})").find("[1000, 60000]") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":5000,"wait_ms":30001})").find("'wait_ms' is 30001") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"","lease_ms":5000})").find("'key' is invalid") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":")" + std::string(513, 'k') + R"(","lease_ms":5000})").find("'key' is invalid") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"a\u0001b","lease_ms":5000})").find("'key' is invalid") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":5000,"owner":")" + std::string(257, 'o') + R"("})").find("'owner'") != std::string::npos);
    // A control character in owner is a 400 here, not a refusal at apply.
    BOOST_TEST(acquire_error(R"({"key":"k","lease_ms":5000,"owner":"a\nb"})").find("'owner' is invalid") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(key_token_needs_a_positive_integer_token) {
    auto ok = parse_key_token(R"({"key":"k","token":41})");
    BOOST_REQUIRE(std::holds_alternative<KeyToken>(ok));
    BOOST_TEST(std::get<KeyToken>(ok).token == 41u);
    BOOST_TEST(std::get<BadRequest>(parse_key_token(R"({"key":"k"})")).message.find("'token' is required") != std::string::npos);
    BOOST_TEST(std::get<BadRequest>(parse_key_token(R"({"key":"k","token":"41"})")).message.find("'token'") != std::string::npos);
    BOOST_TEST(std::get<BadRequest>(parse_key_token(R"({"key":"k","token":0})")).message.find("positive") != std::string::npos);
}

// An election's requests are the lock's, on the key election/NAME.
BOOST_AUTO_TEST_CASE(election_requests_name_the_elections_key_and_a_bad_field) {
    auto c = parse_campaign(R"({"name":"billing","value":"http://a:80","lease_ms":5000,"wait_ms":10,"owner":"w"})",
                            kLimits);
    BOOST_REQUIRE(std::holds_alternative<AcquireRequest>(c));
    const AcquireRequest& a = std::get<AcquireRequest>(c);
    BOOST_TEST(a.key == "election/billing");
    BOOST_TEST(a.value == "http://a:80");
    BOOST_TEST(a.wait_ms == 10u);
    BOOST_TEST(a.owner == "w");
    auto no_value = parse_campaign(R"({"name":"b","lease_ms":5000})", kLimits);
    BOOST_REQUIRE(std::holds_alternative<AcquireRequest>(no_value));
    BOOST_TEST(std::get<AcquireRequest>(no_value).value.empty());
    auto campaign_error = [](const std::string& body) {
        auto r = parse_campaign(body, kLimits);
        return std::holds_alternative<BadRequest>(r) ? std::get<BadRequest>(r).message : "";
    };
    BOOST_TEST(campaign_error(R"({"lease_ms":5000})").find("'name' is required") != std::string::npos);
    BOOST_TEST(campaign_error(R"({"name":"","lease_ms":5000})").find("'name' is 0 bytes") != std::string::npos);
    BOOST_TEST(campaign_error(R"({"name":")" + std::string(504, 'n') + R"(","lease_ms":5000})")
                   .find("'name' is 504 bytes; it must be 1..503") != std::string::npos);
    BOOST_TEST(campaign_error(R"({"name":"a\u0001","lease_ms":5000})").find("'name' is invalid") != std::string::npos);
    BOOST_TEST(campaign_error(R"({"name":"b","lease_ms":5000,"value":")" + std::string(4097, 'v') + R"("})")
                   .find("'value' is invalid: value is 4097 bytes") != std::string::npos);
    BOOST_TEST(campaign_error(R"({"name":"b","lease_ms":5000,"value":"a\nb"})").find("'value' is invalid") !=
               std::string::npos);
    BOOST_TEST(campaign_error(R"({"name":"b","lease_ms":1})").find("[1000, 60000]") != std::string::npos);

    auto p = parse_proclaim(R"({"name":"billing","token":41,"value":"v2"})");
    BOOST_REQUIRE(std::holds_alternative<pgfence::member::Proclaim>(p));
    BOOST_TEST(std::get<pgfence::member::Proclaim>(p).key == "election/billing");
    BOOST_TEST(std::get<pgfence::member::Proclaim>(p).token == 41u);
    BOOST_TEST(std::get<pgfence::member::Proclaim>(p).value == "v2");
    BOOST_TEST(std::get<BadRequest>(parse_proclaim(R"({"name":"b","token":41})")).message.find("'value' is required") !=
               std::string::npos);
    BOOST_TEST(std::get<BadRequest>(parse_proclaim(R"({"name":"b","token":0,"value":""})")).message.find("positive") !=
               std::string::npos);

    auto r = parse_resign(R"({"name":"billing","token":41})");
    BOOST_REQUIRE(std::holds_alternative<KeyToken>(r));
    BOOST_TEST(std::get<KeyToken>(r).key == "election/billing");

    auto l = parse_leader_query("name=a%2Fb");
    BOOST_REQUIRE(std::holds_alternative<pgfence::member::ListLocks>(l));
    BOOST_TEST(*std::get<pgfence::member::ListLocks>(l).key == "election/a/b");
    BOOST_TEST(std::get<BadRequest>(parse_leader_query("")).message.find("'name' is required") != std::string::npos);
    BOOST_TEST(std::get<BadRequest>(parse_leader_query("name=")).message ==
               "query parameter 'name' is 0 bytes; it must be 1..503 bytes");
}

BOOST_AUTO_TEST_CASE(query_param_decodes_percent_escapes) {
    auto q = query_param("x=1&key=report%3A7+a", "key");
    BOOST_REQUIRE(std::holds_alternative<QueryParam>(q));
    BOOST_TEST(std::get<QueryParam>(q).found);
    BOOST_TEST(std::get<QueryParam>(q).value == "report:7 a");
    BOOST_TEST(!std::get<QueryParam>(query_param("x=1", "key")).found);
    BOOST_TEST(std::holds_alternative<BadRequest>(query_param("key=%4", "key")));
    BOOST_TEST(std::holds_alternative<BadRequest>(query_param("key=%zz", "key")));
}

BOOST_AUTO_TEST_CASE(list_query_takes_a_key_or_a_page_and_names_a_bad_parameter) {
    using pgfence::member::ListLocks;
    const ListLocks all = std::get<ListLocks>(parse_list_query(""));
    BOOST_TEST(!all.key.has_value());
    BOOST_TEST(all.limit == pgfence::member::kDefaultListLimit);
    const ListLocks one = std::get<ListLocks>(parse_list_query("key=a%2Fb"));
    BOOST_TEST(one.key.value() == "a/b");
    const ListLocks page = std::get<ListLocks>(parse_list_query("prefix=job%2F&after=job%2F7&limit=50"));
    BOOST_TEST((page.prefixes == std::vector<std::string>{"job/"}));
    BOOST_TEST(page.after == "job/7");
    BOOST_TEST(page.limit == 50u);
    BOOST_TEST((std::get<ListLocks>(parse_list_query("prefix=&after=")).prefixes == std::vector<std::string>{""}));
    auto error = [](std::string_view query) {
        auto r = parse_list_query(query);
        return std::holds_alternative<BadRequest>(r) ? std::get<BadRequest>(r).message : std::string();
    };
    for (const char* bad : {"limit=0", "limit=10001", "limit=-1", "limit=1e3", "limit=", "limit=99999999999"}) {
        BOOST_TEST(error(bad).find("'limit' must be an integer 1..10000") != std::string::npos, bad << ": " << error(bad));
    }
    BOOST_TEST(error("key=").find("'key' is invalid") != std::string::npos);
    BOOST_TEST(error("prefix=%01").find("'prefix' is invalid") != std::string::npos);
    BOOST_TEST(error("after=" + std::string(513, 'a')).find("'after' is invalid") != std::string::npos);
    BOOST_TEST(error("key=a&limit=5").find("cannot be combined") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(member_requests_name_a_bad_id_or_address) {
    auto add = parse_add_member(R"({"id":4,"peer_addr":"10.0.0.4:7400","client_addr":"db4.example:7500"})");
    BOOST_REQUIRE(std::holds_alternative<pgfence::member::AddMember>(add));
    BOOST_TEST(std::get<pgfence::member::AddMember>(add).id == 4u);
    BOOST_TEST(std::get<pgfence::member::AddMember>(add).client_addr == "db4.example:7500");
    auto add_error = [](const std::string& body) {
        auto r = parse_add_member(body);
        return std::holds_alternative<BadRequest>(r) ? std::get<BadRequest>(r).message : "";
    };
    BOOST_TEST(add_error(R"({"id":0,"peer_addr":"h:1","client_addr":"h:2"})").find("'id' must be a member ID") !=
               std::string::npos);
    BOOST_TEST(add_error(R"({"id":4,"client_addr":"h:2"})").find("'peer_addr' is required") != std::string::npos);
    BOOST_TEST(add_error(R"({"id":4,"peer_addr":"nohost","client_addr":"h:2"})").find("'nohost', not HOST:PORT") !=
               std::string::npos);
    BOOST_TEST(add_error(R"({"id":4,"peer_addr":"h:1","client_addr":")" + std::string(300, 'a') + R"(:1"})")
                   .find("must be at most 261") != std::string::npos);
    auto id = parse_member_id(R"({"id":3})");
    BOOST_REQUIRE(std::holds_alternative<std::uint64_t>(id));
    BOOST_TEST(std::get<std::uint64_t>(id) == 3u);
    BOOST_TEST(std::holds_alternative<BadRequest>(parse_member_id(R"({"id":-1})")));
    BOOST_TEST(std::holds_alternative<BadRequest>(parse_member_id(R"({})")));
}

// A set of keys: "keys" instead of "key", 2..64 distinct valid keys, the
// whole request refused naming the bad key.
BOOST_AUTO_TEST_CASE(a_set_of_keys_parses_and_bad_sets_are_refused_naming_the_key) {
    auto r = parse_acquire(R"({"keys":["b","a"],"lease_ms":5000})", kLimits);
    BOOST_REQUIRE(std::holds_alternative<AcquireRequest>(r));
    BOOST_TEST((std::get<AcquireRequest>(r).keys == std::vector<std::string>{"b", "a"}));
    BOOST_TEST(std::get<AcquireRequest>(r).key.empty());
    BOOST_TEST(acquire_error(R"({"keys":["a","b","a"],"lease_ms":5000})").find("key 'a' is named twice") !=
               std::string::npos);
    BOOST_TEST(acquire_error(R"({"keys":[],"lease_ms":5000})").find("names 0 keys") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"keys":["a"],"lease_ms":5000})").find("names 1 keys") != std::string::npos);
    std::string many = R"({"lease_ms":5000,"keys":[)";
    for (int i = 0; i < 65; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\"";
    BOOST_TEST(acquire_error(many + "]}").find("names 65 keys") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"keys":["a","b\u0001"],"lease_ms":5000})").find("key 'b") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"keys":["a",5],"lease_ms":5000})").find("only strings") != std::string::npos);
    BOOST_TEST(acquire_error(R"({"key":"a","keys":["a","b"],"lease_ms":5000})").find("exclusive") !=
               std::string::npos);
    // 64 keys of 512 bytes: past the 32 KiB a set may take.
    std::string big = R"({"lease_ms":5000,"keys":[)";
    for (int i = 0; i < 64; ++i) big += (i ? ",\"" : "\"") + std::to_string(i + 10) + std::string(510, 'k') + "\"";
    BOOST_TEST(acquire_error(big + "]}").find("the limit is 32768") != std::string::npos);
    auto release = parse_key_token(R"({"keys":["x","y"],"token":4})");
    BOOST_REQUIRE(std::holds_alternative<KeyToken>(release));
    BOOST_TEST((std::get<KeyToken>(release).keys == std::vector<std::string>{"x", "y"}));
    BOOST_TEST(std::holds_alternative<BadRequest>(parse_key_token(R"({"keys":["x","x"],"token":4})")));
}

BOOST_AUTO_TEST_SUITE_END()
