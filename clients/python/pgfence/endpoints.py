"""Coordinator endpoints, spelled as fencectl's --endpoints and FENCE_ENDPOINTS
(docs/cli.md, "Endpoints"; coordinator/client/endpoints.h).

An entry is HOST:PORT (plaintext), http://HOST:PORT, or https://HOST:PORT
(TLS). The port follows the last ':' and is 1..65535; the host is everything
before it, not empty, without ' ', '/', tab or ','. A list is comma-separated:
at least one entry, at most 16, no empty entries; duplicates are dropped.
Errors are ValueError naming the bad entry.
"""

import collections
import os

MAX_ENDPOINTS = 16
ENDPOINTS_ENV = "FENCE_ENDPOINTS"
DEFAULT_ENDPOINTS = "127.0.0.1:7501,127.0.0.1:7502,127.0.0.1:7503"


class Endpoint(collections.namedtuple("Endpoint", "host port tls")):
    """One member's HTTP API: host, port and whether it serves TLS (https://)."""

    __slots__ = ()

    @property
    def authority(self):
        return f"{self.host}:{self.port}"

    def __str__(self):
        return ("https://" if self.tls else "") + self.authority

    @property
    def url(self):
        return ("https://" if self.tls else "http://") + self.authority


def _invalid(text, why):
    return ValueError(f"invalid endpoint {text!r}: {why} (expected HOST:PORT, e.g. 127.0.0.1:7501)")


def parse_endpoint(text):
    """One "host:port", "http://host:port" or "https://host:port" -> Endpoint."""
    rest, tls = text, False
    if rest.startswith("https://"):
        rest, tls = rest[len("https://"):], True
    elif rest.startswith("http://"):
        rest = rest[len("http://"):]
    elif "://" in rest:
        raise _invalid(text, "unknown scheme (use http:// or https://)")
    host, colon, port = rest.rpartition(":")
    if not colon:
        raise _invalid(text, "missing ':PORT'")
    if not host:
        raise _invalid(text, "empty host")
    if any(c in host for c in " /\t,"):
        raise _invalid(text, "bad character in host")
    if not port or not all("0" <= c <= "9" for c in port) or len(port) > 9:
        raise _invalid(text, "port is not a number")
    if not 1 <= int(port) <= 65535:
        raise _invalid(text, "port out of range 1-65535")
    return Endpoint(host, int(port), tls)


def parse_endpoints(text):
    """A comma-separated list -> [Endpoint], duplicates dropped, order kept."""
    if not text:
        raise ValueError("empty endpoint list (expected HOST:PORT[,HOST:PORT...])")
    out = []
    for item in text.split(","):
        if not item:
            raise ValueError(f"empty entry in endpoint list {text!r}")
        endpoint = parse_endpoint(item)
        if endpoint in out:
            continue
        if len(out) == MAX_ENDPOINTS:
            raise ValueError(f"too many endpoints (at most {MAX_ENDPOINTS})")
        out.append(endpoint)
    return out


def endpoints_from(given=None):
    """Endpoints from `given` (a str list or an iterable of str/Endpoint) if
    not empty, else $FENCE_ENDPOINTS, else DEFAULT_ENDPOINTS -- fencectl's order."""
    if given:
        if isinstance(given, str):
            return parse_endpoints(given)
        items = [str(e) if isinstance(e, Endpoint) else e for e in given]
        return parse_endpoints(",".join(items))
    env = os.environ.get(ENDPOINTS_ENV, "")
    if env:
        try:
            return parse_endpoints(env)
        except ValueError as e:
            raise ValueError(f"{ENDPOINTS_ENV}: {e}") from None
    return parse_endpoints(DEFAULT_ENDPOINTS)


def endpoint_of_url(url):
    """The Endpoint of an absolute http(s)://host:port/... URL (a 307 Location), or None."""
    if url.startswith("https://"):
        start = len("https://")
    elif url.startswith("http://"):
        start = len("http://")
    else:
        return None
    slash = url.find("/", start)
    try:
        return parse_endpoint(url if slash < 0 else url[:slash])
    except ValueError:
        return None
