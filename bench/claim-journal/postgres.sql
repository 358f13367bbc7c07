-- What a claim journal would save PostgreSQL: claim + acknowledgement of
-- 200,000 tasks, 256 a batch, as chronoq's PostgreSQL store does them today
-- (each claim an UPDATE ... RETURNING of its rows, each acknowledgement
-- another UPDATE) against one journal record per claimed batch, a read-back
-- SELECT, and one UPDATE per task at its acknowledgement. Each batch
-- acknowledges the previous one and claims the next in one transaction, as
-- in W2. Schema 1's task table and indexes (postgres_store.cc).
--
--   psql -X -q URL -f bench/claim-journal/postgres.sql
--   psql -X URL -c '\timing on' -c 'CALL claim_journal_rowwise()'
--   psql -X -q URL -f bench/claim-journal/postgres.sql
--   psql -X URL -c '\timing on' -c 'CALL claim_journal_journal()'
--
-- (bench/claim-journal/run.sh does this on a throwaway cluster.) Each run
-- needs the fresh table this file makes. Not part of any test: a
-- measurement for docs/BENCHMARKS.md ("Not yet done").
DROP TABLE IF EXISTS cj_tasks, cj_claims;
CREATE TABLE cj_tasks(seq BIGINT PRIMARY KEY, due BIGINT, run_at BIGINT, token BIGINT,
  updated BIGINT, backoff_base BIGINT, backoff_cap BIGINT, sid BIGINT, korder BIGINT,
  qid INTEGER NOT NULL, state INTEGER NOT NULL, prio INTEGER NOT NULL, attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL, payload TEXT NOT NULL, name TEXT COLLATE "C",
  key TEXT COLLATE "C", target TEXT, last_error BYTEA, response BYTEA, worker TEXT,
  claimed BIGINT, node TEXT, attempts TEXT);
CREATE INDEX cj_tasks_due ON cj_tasks(state, ((due >> 28)::integer), seq);
CREATE UNIQUE INDEX cj_tasks_name ON cj_tasks(name) WHERE name IS NOT NULL;
CREATE INDEX cj_tasks_korder ON cj_tasks(qid, key, korder, prio, seq)
  WHERE key IS NOT NULL AND state = 0 AND attempt = 0;
CREATE INDEX cj_tasks_key_retry ON cj_tasks(qid)
  WHERE key IS NOT NULL AND state = 0 AND attempt > 0;
CREATE TABLE cj_claims(token BIGINT PRIMARY KEY, lease_until BIGINT, worker TEXT,
  claimed BIGINT, node TEXT, lo BIGINT, hi BIGINT);
INSERT INTO cj_tasks(seq, due, updated, qid, state, prio, attempt, max_attempts, payload)
  SELECT i, 1800000000000000 + i % 1000, 1800000000000000, 1, 0, 0, 0, 3, '{"n":12345}'
  FROM generate_series(1, 200000) i;
VACUUM ANALYZE cj_tasks;

CREATE OR REPLACE PROCEDURE claim_journal_rowwise() LANGUAGE plpgsql AS $$
DECLARE b bigint; r record; n bigint := 0;
BEGIN
  FOR b IN SELECT generate_series(1, 200000, 256) LOOP
    IF b > 1 THEN
      UPDATE cj_tasks SET state=2, due=1900000000000000, token=NULL, updated=1800000000000000
        WHERE state=1 AND seq BETWEEN b-256 AND b-1;
    END IF;
    FOR r IN UPDATE cj_tasks t SET state=1, run_at=due, due=1800000030000000, token=b,
        attempt=attempt+1, updated=1800000000000000, worker='w1', claimed=1800000000000000,
        node='n' WHERE state=0 AND seq BETWEEN b AND b+255 RETURNING t.seq, t.payload LOOP
      n := n + 1;
    END LOOP;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'rowwise: claimed %', n;
END $$;

CREATE OR REPLACE PROCEDURE claim_journal_journal() LANGUAGE plpgsql AS $$
DECLARE b bigint; r record; n bigint := 0;
BEGIN
  FOR b IN SELECT generate_series(1, 200000, 256) LOOP
    IF b > 1 THEN
      UPDATE cj_tasks SET state=2, run_at=due, due=1900000000000000, attempt=attempt+1,
        updated=1800000000000000, worker='w1', claimed=1800000000000000, node='n'
        WHERE state=0 AND seq BETWEEN b-256 AND b-1;
      DELETE FROM cj_claims WHERE token=b-256;
    END IF;
    INSERT INTO cj_claims VALUES(b, 1800000030000000, 'w1', 1800000000000000, 'n', b, b+255);
    FOR r IN SELECT t.seq, t.payload FROM cj_tasks t WHERE state=0 AND seq BETWEEN b AND b+255 LOOP
      n := n + 1;
    END LOOP;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'journal: claimed %', n;
END $$;
