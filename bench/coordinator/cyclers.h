// The two systems under test behind one Cycler interface: pgfence through its
// client library, etcd 3.4 through its v3 JSON gateway (/v3/lease/grant once
// per connection, then /v3/lock/lock + /v3/lock/unlock).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/endpoints.h"
#include "load.h"

namespace pgfence::bench {

// Keys are "<prefix>-<connection>": every connection has its own key.
std::unique_ptr<Cycler> make_pgfence_cycler(const std::vector<client::Endpoint>& endpoints, const std::string& key);

// Connection i talks to endpoints[i % size] (every etcd member serves locks).
std::unique_ptr<Cycler> make_etcd_cycler(const client::Endpoint& endpoint, const std::string& key);

std::string base64(const std::string& in);

}  // namespace pgfence::bench
