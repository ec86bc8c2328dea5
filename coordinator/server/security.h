// The member's security material, loaded from the files its flags name: the
// TLS contexts of the HTTP API and of the peer port, the auth file's policy,
// and the key that signs token proofs. Loaded at start (an error stops the member) and again on SIGHUP
// (reload(): whatever fails to load keeps what was loaded before, and says
// why).
//
// Threading: owned by the loop thread (loaded there, before io.run(), and
// reloaded there on SIGHUP); the contexts and the policy it hands out are
// shared_ptrs that connections keep.
//
// Authentication ends here, in authenticate(): a request's credentials
// become a user of the policy, or a 401 reason. Authorization is decided by
// the policy (auth/policy.h: allowed, holds_any), which member_http.cc asks
// for every request before the request reaches the core.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "auth/policy.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "net/token_signer.h"
#include "server/options.h"

namespace pgfence::server {

// Who a request comes from, when authorization is on.
struct Caller {
    std::shared_ptr<const auth::Policy> policy;  // kept alive for as long as the request needs `user`
    const auth::User* user = nullptr;            // null: not authenticated (see why)
    std::string why;                             // the 401's message when user is null
};

class Security {
public:
    explicit Security(const Options& options) : options_(options) {}

    // Loads every file the flags name; "" or the first error (naming the file).
    std::string load();
    // Loads them again; returns one line per file set that could not be
    // reloaded (the old one stays in use). Empty: all reloaded.
    std::vector<std::string> reload();

    // The current contexts (null when that port is plaintext).
    const net::TlsContextPtr& client_tls() const { return client_tls_; }
    const net::TlsContextPtr& peer_accept_tls() const { return peer_accept_; }
    const net::TlsContextPtr& peer_dial_tls() const { return peer_dial_; }

    bool auth_enabled() const { return policy_ != nullptr; }
    const std::shared_ptr<const auth::Policy>& policy() const { return policy_; }

    // The signer of token proofs (--token-signing-key-file); null: grants carry no proof.
    const std::shared_ptr<const net::TokenSigner>& signer() const { return signer_; }

    // The caller of `req`: a bearer secret in `Authorization: Bearer S`
    // (which wins when both are present), else a verified client
    // certificate's CN. Only meaningful when auth_enabled().
    Caller authenticate(const net::HttpRequest& req) const;

private:
    std::string load_client_tls();
    std::string load_peer_tls();
    std::string load_policy();
    std::string load_signer();
    std::vector<std::string> load_each(bool stop_at_error);

    const Options& options_;
    net::TlsContextPtr client_tls_;
    net::TlsContextPtr peer_accept_;
    net::TlsContextPtr peer_dial_;
    std::shared_ptr<const auth::Policy> policy_;
    std::shared_ptr<const net::TokenSigner> signer_;
};

}  // namespace pgfence::server
