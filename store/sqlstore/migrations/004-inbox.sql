-- v4: the durable inbox of inbound events, the per-connection leases that order their handling,
-- the holders' heartbeats, and the digest of the last menu sent to a session.
-- An event's row is kept after it is done (without payload) so that a redelivery of its key is
-- recognised, until PurgeInbox deletes it. A lease row is kept when released (holder '') so that
-- its epoch keeps increasing: a fencing token is never handed out twice for one connection.

ALTER TABLE sessions ADD COLUMN menu_digest TEXT NOT NULL DEFAULT '';

CREATE TABLE inbox (
    id              BIGSERIAL PRIMARY KEY, -- only: postgres
    id              INTEGER PRIMARY KEY AUTOINCREMENT, -- only: sqlite
    connection_id   TEXT    NOT NULL,
    event_key       TEXT    NOT NULL,
    kind            TEXT    NOT NULL DEFAULT '',
    payload         JSON, -- only: postgres
    payload         TEXT, -- only: sqlite
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'done', 'parked')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL,
    last_error      TEXT    NOT NULL DEFAULT '',
    steps           JSON, -- only: postgres
    steps           TEXT, -- only: sqlite
    accepted_at     BIGINT  NOT NULL,
    done_at         BIGINT  NOT NULL DEFAULT 0,
    UNIQUE (connection_id, event_key)
);
-- A connection's pending events in id order: PendingEvents, Older, ReleaseLease.
CREATE INDEX inbox_pending ON inbox (connection_id, id) WHERE state = 'pending';
-- Due pending events: ClaimableConnections.
CREATE INDEX inbox_due ON inbox (next_attempt_at, id) WHERE state = 'pending';
-- Done events by completion time: PurgeInbox.
CREATE INDEX inbox_done ON inbox (done_at) WHERE state = 'done';
-- Parked events, oldest first: ListParked.
CREATE INDEX inbox_parked ON inbox (id) WHERE state = 'parked';

CREATE TABLE inbox_leases (
    connection_id TEXT   NOT NULL PRIMARY KEY,
    holder        TEXT   NOT NULL DEFAULT '', -- '' when released
    epoch         BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);

CREATE TABLE inbox_holders (
    holder      TEXT   NOT NULL PRIMARY KEY,
    alive_until BIGINT NOT NULL
);

-- inbox_fence raises PBF01 unless its argument is true: CompleteEvent's first statement, so that
-- a completion whose lease or event is gone rolls back the statements sent with it.
CREATE FUNCTION inbox_fence(held BOOLEAN) RETURNS BOOLEAN LANGUAGE plpgsql AS $f$ BEGIN IF NOT held THEN RAISE EXCEPTION 'inbox fence: the lease is lost or the event is no longer pending' USING ERRCODE = 'PBF01'; END IF; RETURN TRUE; END $f$; -- only: postgres
