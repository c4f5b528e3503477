-- v7: the audit's tamper evidence. Every audit row is a link of a hash chain: lane and seq place
-- it (seq counts from 1 in each lane), prev_id and prev name the row before it in its lane (0
-- and '' for the first), and hash is the SHA-256 (hex) of all of it and of every field of the
-- row (see store.AuditHash). A transaction that writes audit rows appends them to one lane,
-- whose head row it locks; concurrent writers take other lanes (FOR UPDATE SKIP LOCKED), so
-- that no writer waits for another's commit. audit_lanes holds each lane's head. Rows written
-- before this version are chained into lane 1 when it is applied (by Go code: see migrate.go).
-- The approval transitions are audit rows too (event: approval.created, approval.voted,
-- approval.cancelled, approval.expired). audit_checkpoints holds the signed checkpoints: each
-- signs every lane's head and the checkpoint before it.

ALTER TABLE audit ADD COLUMN result_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN event TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN detail TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN lane BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN prev_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN prev TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';
-- A lane's rows in chain order: verification, --follow, and no two rows in one place.
CREATE UNIQUE INDEX audit_chain ON audit (lane, seq) WHERE seq > 0;
-- The rows of an approval: its story.
CREATE INDEX audit_approval ON audit (approval_id) WHERE approval_id <> '';

CREATE TABLE audit_lanes (
    lane BIGINT NOT NULL PRIMARY KEY,
    seq  BIGINT NOT NULL DEFAULT 0,  -- the last row's seq (0: none yet)
    id   BIGINT NOT NULL DEFAULT 0,  -- its id
    hash TEXT   NOT NULL DEFAULT ''  -- its hash
);
-- 32 lanes: more than the transactions that write audit rows at once on a few replicas (each
-- replica's group commit uses one). When every lane is taken, a writer waits for one.
INSERT INTO audit_lanes (lane) VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13),
    (14), (15), (16), (17), (18), (19), (20), (21), (22), (23), (24), (25), (26), (27), (28), (29), (30), (31), (32);

-- audit_lane returns its argument, a lane, and raises PBA01 when it is NULL (there is no lane):
-- a statement that appends audit rows fails rather than write none.
CREATE FUNCTION audit_lane(lane BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $f$ BEGIN IF lane IS NULL THEN RAISE EXCEPTION 'audit: no lane to append to (audit_lanes is empty)' USING ERRCODE = 'PBA01'; END IF; RETURN lane; END $f$; -- only: postgres

CREATE TABLE audit_checkpoints (
    seq       BIGINT NOT NULL PRIMARY KEY,
    at        BIGINT NOT NULL,
    signer    TEXT   NOT NULL,
    body      TEXT   NOT NULL,
    signature TEXT   NOT NULL
);
