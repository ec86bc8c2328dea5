# shellcheck shell=bash
# bench/pg/variants.sh: the ways of writing one row that make bench-pg
# compares, as SQL.  Sourced by bench/pg/run.sh (pgbench, timed) and
# bench/pg/instructions.sh (callgrind, instructions per UPDATE).
#
#   plain                UPDATE t SET balance = BAL, fence = TOK WHERE id = ID
#   fence_guard          the same UPDATE on a table protected by fence_protect
#                        (the C trigger)
#   plpgsql              the same UPDATE through an equivalent PL/pgSQL trigger
#   fenced_update        SELECT fenced_update(t, {"id": ID}, {"balance": BAL}, TOK)
#                        on an unprotected table (its WHERE fence < token is
#                        the fence)
#   fenced_update+guard  the same on a protected table (both checks)
#   fence_guard+seq      UPDATE t SET balance = BAL, fence = TOK, fence_seq = TOK
#                        on a table protected in mode sequenced:
#                        every UPDATE writes a newer (token, seq) pair.  The
#                        guard reads both columns of OLD and NEW whichever
#                        half of the pair is newer, so a newer token costs
#                        what a newer sequence under one token does
#
# The outbox (bench/pg/instructions.sh only), one resource per row id
# ('bench:ID'), a newer token every call:
#
#   fence_admit          SELECT fence_admit('bench:ID', TOK): the admission
#                        fence_enqueue makes, alone
#   fence_enqueue        SELECT fence_enqueue('bench:ID', TOK, 'op', URL,
#                        {"balance": BAL}): the admission, the checks of its
#                        arguments, the idempotency key and the entry's
#                        INSERT into fence_outbox
#
# Rejections (bench/pg/instructions.sh only), one resource per row id,
# advanced to BENCH_REJECT_FENCE first, so every call is refused:
#
#   advance_stale           SELECT fence_advance('bench:ID', TOK) -> false,
#                           recorded in fence_rejections (the ring on, at its
#                           default size)
#   advance_stale+ring_off  the same with pg_fence.rejection_log_size = 0:
#                           the difference is what recording a rejection
#                           costs (pg_fence.log_rejections is off in both)
#
# Its baseline (bench/pg/instructions.sh only):
#
#   plain+seq            the fence_guard+seq UPDATE on the same table without
#                        a trigger: what the wider row and the longer SET list
#                        cost, which a sequenced table pays whatever checks it
#
# Candidate trigger shapes measured against fence_guard
# (bench/pg/instructions.sh only; none of them is what fence_protect
# installs, and each gives up something docs/sql.md promises, see
# BENCH_CANDIDATE_VARIANTS below):
#
#   guard_when           fence_guard as a BEFORE UPDATE trigger with
#                        WHEN (NEW.fence IS NULL OR NEW.fence <= OLD.fence),
#                        so the function is not called for a newer token
#   after_plpgsql        the PL/pgSQL check as an AFTER ROW UPDATE trigger
#                        (no row lock before it; an after-trigger event
#                        per row instead)
#   after_when           an AFTER ROW UPDATE trigger with that WHEN clause,
#                        whose function (never called here) raises 55F01
#
# Token proofs (bench/pg/instructions.sh only), on a table that
# verifies proofs under the constant lock key 'bench', with proofs pre-signed
# with the shared test vector's key (tests/vectors), which the database trusts:
#
#   fence_guard+proof        mode same_generation, every UPDATE writes the
#                            same token with the same proof, set once with
#                            SET pg_fence.proof: a lease re-sending its proof
#                            (after the first, a cache hit)
#   fence_guard+proof_fresh  strict, token i with its own proof, set by a
#                            SET pg_fence.proof line before each UPDATE:
#                            every proof is verified (Ed25519)
#   fence_guard+set          fence_guard (no lock key) with the same SET
#                            lines, which it ignores: the baseline of
#                            fence_guard+proof_fresh
#   fence_guard+preempt      fence_guard+proof with SET pg_fence.preempt = on:
#                            every transaction registers its admission of the
#                            lock key in the preemption registry, checks it at
#                            PRE_COMMIT and removes it at the end; its
#                            baseline is fence_guard+proof (preemption off)
#
# Every variant, plain included, writes the fence column with the token
# through the SET list, the fast path of fence_guard (token in NEW, no
# setting to read).  The SQL printed here has one statement per paragraph
# (";" and a blank line after each), which psql and `postgres --single -j`
# both read one statement at a time.

# shellcheck disable=SC2034  # read by the scripts that source this file
BENCH_VARIANTS="plain fence_guard plpgsql fenced_update fenced_update+guard fence_guard+seq"
# Measured by instructions only.  The WHEN clauses skip fence_stats'
# accepted count; the AFTER triggers cannot write pg_fence.token into NEW
# and are not fired on the source partition of a row that moves.
BENCH_CANDIDATE_VARIANTS="guard_when after_plpgsql after_when"
# Measured by instructions only: fence_guard+seq minus it is the guard's
# cost on a sequenced table.
BENCH_SEQ_VARIANTS="plain+seq"
# Measured by instructions only: per call of the function, not per UPDATE.
BENCH_OUTBOX_VARIANTS="fence_admit fence_enqueue"
# Measured by instructions only: per refused call; the settings of each
# run are in instructions.sh (bench_run_settings).
BENCH_REJECTION_VARIANTS="advance_stale advance_stale+ring_off"
# The fence of every resource of the rejection variants: above every token
BENCH_REJECT_FENCE=1000000000000
# Measured by instructions only; need the proofs instructions.sh signs.
BENCH_PROOF_VARIANTS="fence_guard+proof fence_guard+proof_fresh fence_guard+set fence_guard+preempt"
# The token every fence_guard+proof UPDATE writes, and the proofs' lock key
BENCH_PROOF_TOKEN=1000000
BENCH_PROOF_KEY=bench

# The extension and the PL/pgSQL trigger function, once per database; the
# test vector's public key is trusted (ROOT: the repository).
bench_database_sql() {
  cat <<SQL
CREATE EXTENSION pg_fence;

SELECT fence_trust_key('$(cat "$ROOT/tests/vectors/token_proof_v1.pub")');

SQL
  cat <<'SQL'

-- the PL/pgSQL equivalent of fence_guard's strict check for this UPDATE
CREATE FUNCTION bench_plpgsql_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.fence IS NULL OR NEW.fence < 0 OR NEW.fence <= OLD.fence THEN
    RAISE EXCEPTION 'stale fencing token % (fence is %)', NEW.fence, OLD.fence
      USING ERRCODE = '55F01';
  END IF;
  RETURN NEW;
END $$;

-- what after_when calls, only for a token not newer than the row's fence
CREATE FUNCTION bench_plpgsql_reject() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'stale fencing token % (fence is %)', NEW.fence, OLD.fence
    USING ERRCODE = '55F01';
END $$;

SQL
}

# TABLE with ROWS rows of fence 0, with the trigger VARIANT needs, vacuumed.
bench_table_sql() {
  local variant=$1 table=$2 rows=$3
  local stale='NEW.fence IS NULL OR NEW.fence <= OLD.fence' seq_column=''
  # only the sequenced table has the second column: the others stay as they were measured
  [[ $variant == *+seq ]] && seq_column=', fence_seq bigint NOT NULL DEFAULT 0'
  printf '%s\n\n' \
    "CREATE TABLE $table (id int PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL DEFAULT 0$seq_column);" \
    "INSERT INTO $table SELECT i, 0, 0 FROM generate_series(1, $rows) AS i;"
  case $variant in
    fence_guard+seq)
      printf '%s\n\n' "SELECT fence_protect('$table', mode => 'sequenced');" ;;
    fence_guard | fenced_update+guard | fence_guard+set)
      printf '%s\n\n' "SELECT fence_protect('$table');" ;;
    fence_guard+proof | fence_guard+preempt)
      printf '%s\n\n' "SELECT fence_protect('$table', mode => 'same_generation', lock_key => '$BENCH_PROOF_KEY');" ;;
    fence_guard+proof_fresh)
      printf '%s\n\n' "SELECT fence_protect('$table', lock_key => '$BENCH_PROOF_KEY');" ;;
    plpgsql)
      printf '%s\n\n' "CREATE TRIGGER zzz_plpgsql_guard BEFORE UPDATE ON $table FOR EACH ROW EXECUTE FUNCTION bench_plpgsql_guard();" ;;
    guard_when)
      printf '%s\n\n' "CREATE TRIGGER zzz_fence_guard BEFORE UPDATE ON $table FOR EACH ROW WHEN ($stale) EXECUTE FUNCTION fence_guard('fence', 'strict');" ;;
    after_plpgsql)
      printf '%s\n\n' "CREATE TRIGGER zzz_plpgsql_guard AFTER UPDATE ON $table FOR EACH ROW EXECUTE FUNCTION bench_plpgsql_guard();" ;;
    after_when)
      printf '%s\n\n' "CREATE TRIGGER zzz_plpgsql_guard AFTER UPDATE ON $table FOR EACH ROW WHEN ($stale) EXECUTE FUNCTION bench_plpgsql_reject();" ;;
    advance_stale*)
      printf '%s\n\n' "SELECT count(*) FROM generate_series(1, $rows) AS i WHERE fence_advance('bench:' || i, $BENCH_REJECT_FENCE);" ;;
  esac
  printf '%s\n\n' "VACUUM ANALYZE $table;"
}

# VARIANT's statement on TABLE; ID, BAL and TOK are its values as the
# caller spells them (pgbench variables, or $n parameters of PREPARE).
bench_statement() {
  local variant=$1 table=$2 id=$3 bal=$4 tok=$5
  case $variant in
    fence_admit)
      echo "SELECT fence_admit('bench:' || $id, CAST($tok AS bigint));" ;;
    advance_stale*)
      echo "SELECT fence_advance('bench:' || $id, CAST($tok AS bigint));" ;;
    fence_enqueue)
      echo "SELECT fence_enqueue('bench:' || $id, CAST($tok AS bigint), 'op', 'http://127.0.0.1:9/hook', jsonb_build_object('balance', CAST($bal AS int)));" ;;
    fenced_update*)
      echo "SELECT fenced_update('$table', jsonb_build_object('id', CAST($id AS int)), jsonb_build_object('balance', CAST($bal AS int)), CAST($tok AS bigint));" ;;
    *+seq)
      echo "UPDATE $table SET balance = $bal, fence = $tok, fence_seq = $tok WHERE id = $id;" ;;
    *)
      echo "UPDATE $table SET balance = $bal, fence = $tok WHERE id = $id;" ;;
  esac
}
