#include "server/security.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pgfence::server {

std::string Security::load_client_tls() {
    if (!options_.client_tls()) return {};
    net::TlsContextPtr ctx;
    const net::TlsSide side = options_.client_cert_auth ? net::TlsSide::kServerVerify : net::TlsSide::kServer;
    auto err = net::make_tls_context({options_.cert_file, options_.key_file, options_.trusted_ca_file}, side, ctx);
    if (!err.empty()) return "client TLS: " + err;
    client_tls_ = std::move(ctx);
    return {};
}

std::string Security::load_peer_tls() {
    if (!options_.peer_tls()) return {};
    const net::TlsFiles files{options_.peer_cert_file, options_.peer_key_file, options_.peer_trusted_ca_file};
    net::TlsContextPtr accept, dial;
    auto err = net::make_tls_context(files, net::TlsSide::kServerVerify, accept);
    if (err.empty()) err = net::make_tls_context(files, net::TlsSide::kClient, dial);
    if (!err.empty()) return "peer TLS: " + err;
    peer_accept_ = std::move(accept);
    peer_dial_ = std::move(dial);
    return {};
}

std::string Security::load_policy() {
    if (options_.auth_file.empty()) return {};
    std::string text;
    std::string err = net::read_small_file(options_.auth_file, "auth file", auth::kMaxFileBytes, text);
    if (!err.empty()) return err;
    auto policy = std::make_shared<auth::Policy>();
    err = auth::Policy::parse(text, *policy);
    if (!err.empty()) return "auth file '" + options_.auth_file + "': " + err;
    policy_ = std::move(policy);
    return {};
}

std::string Security::load_signer() {
    if (options_.token_signing_key_file.empty()) return {};
    std::shared_ptr<net::TokenSigner> signer;
    if (auto err = net::TokenSigner::load(options_.token_signing_key_file, signer); !err.empty()) return err;
    signer_ = std::move(signer);
    return {};
}

// Each file set in turn; the first error ends a load(), not a reload().
std::vector<std::string> Security::load_each(bool stop_at_error) {
    std::vector<std::string> failed;
    for (auto step : {&Security::load_client_tls, &Security::load_peer_tls, &Security::load_policy,
                      &Security::load_signer}) {
        if (auto err = (this->*step)(); !err.empty()) {
            failed.push_back(std::move(err));
            if (stop_at_error) break;
        }
    }
    return failed;
}

std::string Security::load() {
    std::vector<std::string> failed = load_each(true);
    return failed.empty() ? std::string() : std::move(failed.front());
}

std::vector<std::string> Security::reload() { return load_each(false); }

Caller Security::authenticate(const net::HttpRequest& req) const {
    Caller c;
    c.policy = policy_;
    if (!policy_) {
        c.why = "authorization is not enabled";
        return c;
    }
    if (!req.authorization.empty()) {
        // RFC 7235: the scheme is case-insensitive; blanks separate it from the secret.
        std::string_view value = req.authorization;
        const std::size_t space = value.find_first_of(" \t");
        std::string scheme(value.substr(0, space));
        for (char& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (scheme != "bearer" || space == std::string_view::npos) {
            c.why = "the Authorization header must be 'Bearer SECRET'";
            return c;
        }
        value.remove_prefix(space);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        auth::BearerProblem problem = auth::BearerProblem::kNone;
        c.user = policy_->user_for_bearer(value, problem);
        if (!c.user) {
            c.why = problem == auth::BearerProblem::kMalformed
                        ? "the bearer secret is not " + std::to_string(auth::kMinBearerChars) + ".." +
                              std::to_string(auth::kMaxBearerChars) + " characters of base64/base64url"
                        : std::string("the bearer secret is not known");
        }
        return c;
    }
    if (!req.client_cn.empty()) {
        c.user = policy_->user_named(req.client_cn);
        if (!c.user) c.why = "no user is named by the client certificate's CN";
        return c;
    }
    c.why = "credentials required: a bearer token (Authorization: Bearer ...) or a client certificate";
    return c;
}

}  // namespace pgfence::server
