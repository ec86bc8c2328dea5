// The two systems under test behind one Script interface (load.h): pgfence
// through its HTTP API (/v1/acquire + /v1/release, following the 307 to the
// leader), etcd 3.4 through its v3 JSON gateway (/v3/lease/grant once per
// connection, untimed, then /v3/lock/lock + /v3/lock/unlock).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/endpoints.h"
#include "client/http_connection.h"
#include "load.h"

namespace pgfence::bench {

// Keys are "<prefix>-<connection>": every connection has its own key.
// Connection i starts at endpoints[i % size] and moves to the next endpoint
// after an error.
std::unique_ptr<Script> make_pgfence_script(const std::vector<client::Endpoint>& endpoints,
                                            int connection, const std::string& key);

// Throws std::runtime_error if the lease grant fails (setup, before timing).
// `settings` carry the TLS context for https:// endpoints.
std::unique_ptr<Script> make_etcd_script(const std::vector<client::Endpoint>& endpoints,
                                         int connection, const std::string& key,
                                         std::shared_ptr<const client::ConnectionSettings> settings);

std::string base64(const std::string& in);

}  // namespace pgfence::bench
