#!/usr/bin/python3
"""The Python client against TLS clusters (scripts/cluster.sh start --tls;
CA in DIR/tls/ca.pem) with --auth-file. One takes bearer secrets: https
endpoints checked against the CA; a bearer secret from a file (also through
FENCE_CACERT_FILE / FENCE_BEARER_FILE, fencectl's variables); a follower's
https redirect followed; 401 without credentials and 403 outside the user's
prefix, as NotAuthorizedError, with nothing granted; a CA that did not sign
the members' certificates -> UnavailableError naming the certificate. The
other has --client-cert-auth: a client certificate (CN=admin) is the admin
user; without one the handshake is refused (UnavailableError)."""

import base64
import hashlib
import os
import secrets
import unittest

import harness
from harness import pgfence


def new_secret():
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


class SecurityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w1 = new_secret()
        cls.auth_dir = os.path.join(harness.WORK, "auth")
        os.makedirs(cls.auth_dir)
        cls.bearer_file = os.path.join(cls.auth_dir, "w1.bearer")
        with open(cls.bearer_file, "w") as f:
            f.write(cls.w1 + "\n")
        os.chmod(cls.bearer_file, 0o600)
        ops = new_secret()
        ops_file = os.path.join(cls.auth_dir, "ops.bearer")
        with open(ops_file, "w") as f:
            f.write(ops + "\n")
        os.chmod(ops_file, 0o600)
        auth_file = os.path.join(cls.auth_dir, "auth.txt")
        with open(auth_file, "w") as f:
            f.write("role reporter read:report/ lock:report/\n"
                    "role ops admin read: lock:\n"
                    f"user w1 reporter token:sha256:{hashlib.sha256(cls.w1.encode()).hexdigest()}\n"
                    f"user ops ops token:sha256:{hashlib.sha256(ops.encode()).hexdigest()}\n"
                    "user admin ops\n")  # authenticates by its client certificate (CN=admin)
        # cluster.sh's leader poll needs admin: ops's secret, or client-admin's certificate.
        cls.cluster = harness.Cluster("cluster", tls=True, flags=f"--auth-file {auth_file}",
                                      env={"FENCE_STATUS_BEARER_FILE": ops_file})
        cls.certs = harness.Cluster("certs", tls=True, flags=f"--auth-file {auth_file} --client-cert-auth")
        cls.ca = os.path.join(cls.cluster.dir, "tls", "ca.pem")
        cls.admin = dict(ca_file=cls.ca, bearer_file=ops_file)
        cls.wrong_ca = os.path.join(cls.cluster.dir, "tls", "peer-ca.pem")  # a CA, not the HTTP API's

    def setUp(self):
        for name in ("FENCE_CACERT_FILE", "FENCE_CERT_FILE", "FENCE_KEY_FILE", "FENCE_BEARER_FILE"):
            os.environ.pop(name, None)

    def test_bearer_over_tls(self):
        self.assertTrue(self.cluster.endpoints.startswith("https://"))
        c = pgfence.Client(self.cluster.endpoints, ca_file=self.ca, bearer_file=self.bearer_file)
        with pgfence.lock("report/1", lease="2s", wait="0s", client=c) as lease:
            self.assertTrue(c.leader.tls)
            self.assertEqual(c.get("report/1").token, lease.token)
            c.keepalive("report/1", lease.token)
        with self.assertRaises(pgfence.NotFoundError):
            c.get("report/1")
        c.close()

    def test_credentials_from_environment_and_https_redirect(self):
        os.environ["FENCE_CACERT_FILE"] = self.ca
        os.environ["FENCE_BEARER_FILE"] = self.bearer_file
        admin = pgfence.Client(self.cluster.endpoints, **self.admin)
        leader = harness.wait_until(5, lambda: self.cluster.leader_id(admin), "a leader")
        follower = leader % 3 + 1
        c = pgfence.Client(self.cluster.endpoint(follower))  # CA and secret from the environment
        lease = c.acquire("report/2", lease="2s")
        self.assertEqual(str(c.leader), self.cluster.endpoint(leader), "the https 307 was not followed")
        c.release("report/2", lease.token)
        c.close()
        admin.close()

    def test_401_and_403(self):
        admin = pgfence.Client(self.cluster.endpoints, **self.admin)
        anonymous = pgfence.Client(self.cluster.endpoints, ca_file=self.ca, bearer="")
        with self.assertRaises(pgfence.NotAuthorizedError) as e:
            anonymous.acquire("report/3", lease="2s")
        self.assertEqual(e.exception.http_status, 401)
        self.assertIn("not authenticated", str(e.exception))
        self.assertTrue(str(e.exception).startswith(
            f"acquire 'report/3': not authenticated by {e.exception.endpoint}: "), str(e.exception))
        self.assertIn(e.exception.endpoint, self.cluster.endpoints.split(","))
        self.assertEqual((e.exception.key, e.exception.exit_code), ("report/3", 7))
        w1 = pgfence.Client(self.cluster.endpoints, ca_file=self.ca, bearer_file=self.bearer_file)
        with self.assertRaises(pgfence.NotAuthorizedError) as e:
            w1.acquire("job/1", lease="2s")
        self.assertEqual(e.exception.http_status, 403)
        self.assertIn("no lock permission on key 'job/1'", str(e.exception))
        self.assertTrue(str(e.exception).startswith("acquire 'job/1': not authorized by https://"), str(e.exception))
        with self.assertRaises(pgfence.NotAuthorizedError):
            w1.status()
        self.assertEqual([i.key for i in admin.list()], [], "a refused acquire left a lock")
        for c in (admin, anonymous, w1):
            c.close()

    def test_client_certificate(self):
        tls = os.path.join(self.certs.dir, "tls")
        admin = pgfence.Client(self.certs.endpoints, ca_file=os.path.join(tls, "ca.pem"), bearer="",
                               cert_file=os.path.join(tls, "client-admin.pem"),
                               key_file=os.path.join(tls, "client-admin-key.pem"))
        self.assertIn(admin.status()["role"], ("leader", "follower"))
        lease = admin.acquire("job/2", lease="2s")  # admin's role locks every key
        self.assertEqual([(i.key, i.token) for i in admin.list()], [("job/2", lease.token)])
        admin.release("job/2", lease.token)
        admin.close()
        no_cert = pgfence.Client(self.certs.endpoints, ca_file=os.path.join(tls, "ca.pem"), bearer="",
                                 timeout="1s")
        with self.assertRaises(pgfence.UnavailableError) as e:
            no_cert.get("job/2")
        self.assertIn("certificate required", str(e.exception))

    def test_wrong_ca_is_refused(self):
        c = pgfence.Client(self.cluster.endpoints, ca_file=self.wrong_ca, bearer_file=self.bearer_file,
                           timeout="1s")
        with self.assertRaises(pgfence.UnavailableError) as e:
            c.get("report/1")
        self.assertIn("certificate", str(e.exception))
        with self.assertRaises(ValueError):
            pgfence.Client(self.cluster.endpoints, ca_file=os.path.join(self.auth_dir, "missing.pem"))


if __name__ == "__main__":
    harness.main()
