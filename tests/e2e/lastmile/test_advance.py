#!/usr/bin/python3
"""pgfence.lock(..., advance=..., db=...) end to end, with a real 3-member
cluster and a real PostgreSQL with pg_fence (ports of the publish-first
tests: cluster base 14600, PostgreSQL 14620):

- inside the block, before it has written, another session already finds
  fence_current(R) = the lease's token at every resource, and an older
  token's fence_admit is refused (55F01) and its fence_advance answers false;
  also over a connection in autocommit mode;
- a resource that holds a newer fence: StalePublishError (exit_code 10,
  naming the resource, the token and the fence), the block never runs, the
  key is free at once and the caller's connection is usable (rolled back);
- a closed connection, and a database without pg_fence: PublishError
  (exit_code 11), the block never runs, the key is free;
- an older holder paused inside its fence_admit transaction holds the
  resource's row: the publish gives up within the lease's usable time (or
  advance_timeout) with PublishError (lock or statement timeout), released;
- pg_fence.preempt: a newer token in flight at a resource (an open
  transaction admitted it) makes the publish StalePublishError with
  SQLSTATE 55F01 (exit_code 10), at once, released, nothing published;
- a wait that leaves no time in the lease (another holder kept the key past
  it): LeaseLostError (exit_code 4), nothing published, released;
- a failed release after a failed publish does not hide the PublishError;
- a connection whose search_path lacks pg_fence's schema publishes too;
- advance= without db= (and a bad resource name): ValueError before any request."""

import os
import sys
import threading
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import harness  # noqa: E402
from harness import pgfence, psql  # noqa: E402
import psycopg2  # noqa: E402  (Debian's python3-psycopg2)

CLUSTER_BASE, PG_PORT = 14600, 14620
STALE_FENCE = 9000000000


def fence_of(resource):
    return psql(f"SELECT fence_current('{resource}')")


def sqlstate_of(statement):
    """Runs `statement` in a transaction of its own; None or its SQLSTATE."""
    conn = psycopg2.connect("")
    try:
        with conn, conn.cursor() as cur:
            cur.execute(statement)
        return None
    except psycopg2.Error as e:
        return e.pgcode
    finally:
        conn.close()


class LockAdvance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = harness.Postgres("pg", port=PG_PORT)
        psql("CREATE EXTENSION pg_fence")
        psql("CREATE DATABASE nofence")
        cls.cluster = harness.Cluster("cluster", base=CLUSTER_BASE)
        cls.client = pgfence.Client(cls.cluster.endpoints)
        harness.wait_until(20, lambda: cls.cluster.leader_id(cls.client), "a leader")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.db = psycopg2.connect("")
        self.addCleanup(self.db.close)

    def lock(self, key, **kwargs):
        return pgfence.lock(key, lease="5s", wait="0s", client=self.client, **kwargs)

    def assert_free(self, key):
        with self.assertRaises(pgfence.NotFoundError):
            self.client.get(key)

    def test_the_token_is_the_fence_before_the_block_writes(self):
        older = self.client.acquire("py:1", lease="1s", wait="0s")
        self.client.release("py:1", older.token)
        psql(f"SELECT fence_advance('py:1', {older.token})")
        with self.lock("py:1", advance=["py:1", "py:other"], db=self.db) as lease:
            self.assertEqual(fence_of("py:1"), str(lease.token))
            self.assertEqual(fence_of("py:other"), str(lease.token))
            self.assertEqual(sqlstate_of(f"SELECT fence_admit('py:1', {older.token})"), "55F01")
            self.assertEqual(psql(f"SELECT fence_advance('py:1', {older.token})"), "f")
        self.assert_free("py:1")

    def test_an_autocommit_connection_publishes_too(self):
        self.db.autocommit = True
        with self.lock("py:auto", advance="py:auto", db=self.db) as lease:
            self.assertEqual(fence_of("py:auto"), str(lease.token))

    def test_a_newer_fence_there_raises_stale_and_releases(self):
        psql(f"SELECT fence_advance('py:2', {STALE_FENCE})")
        entered = False
        with self.assertRaises(pgfence.StalePublishError) as caught:
            with self.lock("py:2", advance="py:2", db=self.db):
                entered = True
        e = caught.exception
        self.assertFalse(entered, "the block ran although the publish was stale")
        self.assertEqual(e.exit_code, pgfence.exitcodes.EXIT_STALE)
        self.assertEqual((e.resource, e.fence), ("py:2", STALE_FENCE))
        self.assertRegex(str(e), rf'^token {e.token} not published at resource "py:2": its fence is {STALE_FENCE}')
        self.assert_free("py:2")
        with self.db.cursor() as cur:  # rolled back: the caller's connection goes on
            cur.execute("SELECT 1")
            self.assertEqual(cur.fetchone()[0], 1)

    def test_database_errors_raise_publish_error_and_release(self):
        self.db.close()
        with self.assertRaises(pgfence.PublishError) as caught:
            with self.lock("py:3", advance="py:3", db=self.db):
                self.fail("the block ran over a closed connection")
        self.assertNotIsInstance(caught.exception, pgfence.StalePublishError)
        self.assertEqual(caught.exception.exit_code, pgfence.exitcodes.EXIT_DATABASE)
        self.assertIn('not published at resource "py:3": fence_advance failed: ', str(caught.exception))
        self.assert_free("py:3")
        other = psycopg2.connect(dbname="nofence")
        self.addCleanup(other.close)
        with self.assertRaises(pgfence.PublishError) as caught:
            with self.lock("py:3", advance="py:3", db=other):
                self.fail("the block ran without pg_fence in the database")
        self.assertIn('not published at resource "py:3": pg_fence is not installed in this database',
                      str(caught.exception))
        self.assert_free("py:3")

    def test_a_paused_older_holder_makes_the_publish_time_out(self):
        psql("SELECT fence_advance('py:paused', 1)")
        older = psycopg2.connect("")
        self.addCleanup(older.close)
        with older.cursor() as cur:  # an older holder's open transaction: it holds the resource's row
            cur.execute("SELECT fence_admit('py:paused', 1)")
        # if the publish waited for it, it would succeed once this ends it (10s): the test fails, not hangs
        ender = threading.Timer(10, older.rollback)
        ender.start()
        self.addCleanup(ender.cancel)
        for key, kwargs, bound in (("py:paused", {"lease": "2s"}, 3.0),
                                   ("py:paused2", {"lease": "20s", "advance_timeout": "300ms"}, 1.5)):
            with self.subTest(key=key):
                started = time.monotonic()
                with self.assertRaises(pgfence.PublishError) as caught:
                    with pgfence.lock(key, wait="0s", client=self.client, advance="py:paused", db=self.db,
                                      **kwargs):
                        self.fail("the block ran although the publish did not commit")
                elapsed = time.monotonic() - started
                self.assertIn(caught.exception.sqlstate, ("55P03", "57014"), str(caught.exception))
                self.assertLess(elapsed, bound, f"the publish behind a paused holder took {elapsed:.1f}s")
                self.assert_free(key)
                self.db.rollback()
        self.assertEqual(fence_of("py:paused"), "1")

    def test_a_newer_token_in_flight_is_a_stale_publish(self):
        # pg_fence.preempt: a newer holder's open transaction admitted its token at the resource;
        # the older lease's publish is refused 55F01 ("in flight"), which is a stale publish
        newer = psycopg2.connect("")
        self.addCleanup(newer.close)
        with newer.cursor() as cur:
            cur.execute("SET pg_fence.preempt = on")
            cur.execute(f"SELECT fence_admit('py:inflight', {STALE_FENCE})")
        with self.db.cursor() as cur:
            cur.execute("SET pg_fence.preempt = on")
        self.db.commit()
        started = time.monotonic()
        with self.assertRaises(pgfence.StalePublishError) as caught:
            with self.lock("py:inflight", advance="py:inflight", db=self.db):
                self.fail("the block ran although a newer token is in flight at the resource")
        self.assertLess(time.monotonic() - started, 3.0, "the refusal waited for the newer transaction")
        self.assertEqual(caught.exception.sqlstate, "55F01", str(caught.exception))
        self.assertEqual(caught.exception.exit_code, 10)
        self.assertIn(f"a newer token {STALE_FENCE} is in flight", str(caught.exception))
        self.assert_free("py:inflight")
        newer.rollback()
        self.assertEqual(fence_of("py:inflight"), "", "the refused publish left a fence")

    def test_a_wait_that_leaves_no_time_is_a_lost_lease(self):
        # another holder keeps the key past our whole lease: the grant answers after the
        # lease's deadline - margin, so nothing is published and LeaseLostError (exit 4) is raised
        psql("SELECT fence_advance('py:late', 1)")
        other_client = pgfence.Client(self.cluster.endpoints)  # (the timer's thread has a client of its own)
        self.addCleanup(other_client.close)
        other = other_client.acquire("py:late", lease="10s")
        releaser = threading.Timer(1.5, lambda: other_client.release("py:late", other.token))
        releaser.start()
        self.addCleanup(releaser.cancel)
        with self.assertRaises(pgfence.LeaseLostError) as caught:
            with pgfence.lock("py:late", lease="1s", wait="10s", client=self.client, advance="py:late",
                              db=self.db):
                self.fail("the block ran with no time left in the lease")
        self.assertEqual(caught.exception.exit_code, 4)
        self.assertEqual(fence_of("py:late"), "1", "a lease with no time left published its token")
        self.assert_free("py:late")

    def test_a_failed_release_does_not_hide_the_publish_error(self):
        self.db.close()
        with mock.patch.object(pgfence.HeldLock, "release", side_effect=RuntimeError("release failed")):
            with self.assertRaises(pgfence.PublishError):
                with self.lock("py:7", advance="py:7", db=self.db):
                    self.fail("the block ran over a closed connection")
        self.client.release("py:7", self.client.get("py:7").token)

    def test_pg_fence_outside_the_search_path(self):
        db = psycopg2.connect("", options="-c search_path=pg_catalog")
        self.addCleanup(db.close)
        with self.lock("py:path", advance="py:path", db=db) as lease:
            self.assertEqual(fence_of("py:path"), str(lease.token))

    def test_bad_arguments_are_refused_before_any_request(self):
        with self.assertRaisesRegex(ValueError, "advance= and db= go together"):
            self.lock("py:4", advance="py:4")
        with self.assertRaisesRegex(ValueError, "must be 1-512 bytes"):
            self.lock("py:4", advance="", db=self.db)
        with self.assertRaisesRegex(ValueError, "control character"):
            self.lock("py:4", advance=["ok", "a\nb"], db=self.db)
        with self.assertRaisesRegex(ValueError, "at most 64"):
            self.lock("py:4", advance=[f"r{i}" for i in range(65)], db=self.db)
        self.assert_free("py:4")


if __name__ == "__main__":
    harness.main()
