-- v1: initial schema: sessions, tagged records, sealed credentials, outbox, memory, audit.
-- Timestamps are unix milliseconds (0 = unset); JSON columns keep the caller's bytes verbatim.

CREATE TABLE sessions (
    connection_id     TEXT    NOT NULL PRIMARY KEY,
    state             TEXT    NOT NULL DEFAULT '',
    language          TEXT    NOT NULL DEFAULT '',
    authenticated     BOOLEAN NOT NULL DEFAULT FALSE,
    identity          TEXT    NOT NULL DEFAULT '',
    display_name      TEXT    NOT NULL DEFAULT '',
    roles             JSON, -- only: postgres
    roles             TEXT, -- only: sqlite
    credential_expiry BIGINT  NOT NULL DEFAULT 0,
    flow              JSON, -- only: postgres
    flow              TEXT, -- only: sqlite
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL
);
CREATE INDEX sessions_identity ON sessions (identity, updated_at);

CREATE TABLE records (
    namespace  TEXT  NOT NULL,
    record_key TEXT  NOT NULL CHECK (record_key <> ''),
    value      BYTEA NOT NULL, -- only: postgres
    value      BLOB  NOT NULL, -- only: sqlite
    PRIMARY KEY (namespace, record_key)
);

CREATE TABLE record_tags (
    namespace  TEXT    NOT NULL,
    record_key TEXT    NOT NULL,
    pos        INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    PRIMARY KEY (namespace, record_key, pos),
    FOREIGN KEY (namespace, record_key) REFERENCES records (namespace, record_key) ON DELETE CASCADE
);
CREATE INDEX record_tags_lookup ON record_tags (namespace, name, value);

CREATE TABLE credentials (
    identity   TEXT   NOT NULL,
    server     TEXT   NOT NULL,
    kind       TEXT   NOT NULL,
    key_id     TEXT   NOT NULL,
    nonce      BYTEA  NOT NULL, -- only: postgres
    nonce      BLOB   NOT NULL, -- only: sqlite
    ciphertext BYTEA  NOT NULL, -- only: postgres
    ciphertext BLOB   NOT NULL, -- only: sqlite
    status     TEXT   NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (identity, server, kind)
);
CREATE INDEX credentials_key_id ON credentials (key_id);

CREATE TABLE outbox (
    id              BIGSERIAL PRIMARY KEY, -- only: postgres
    id              INTEGER PRIMARY KEY AUTOINCREMENT, -- only: sqlite
    identity        TEXT    NOT NULL DEFAULT '',
    connection_id   TEXT    NOT NULL DEFAULT '',
    kind            TEXT    NOT NULL DEFAULT '',
    payload         JSON, -- only: postgres
    payload         TEXT, -- only: sqlite
    created_at      BIGINT  NOT NULL,
    next_attempt_at BIGINT  NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id);
CREATE INDEX outbox_identity ON outbox (identity, id);
CREATE INDEX outbox_connection ON outbox (connection_id, id);

-- memory_seq holds the last sequence number handed out per key; its row lock serializes appends.
CREATE TABLE memory_seq (
    memory_key TEXT   NOT NULL PRIMARY KEY,
    last_seq   BIGINT NOT NULL
);

CREATE TABLE memory (
    memory_key TEXT   NOT NULL,
    seq        BIGINT NOT NULL,
    role       TEXT   NOT NULL DEFAULT '',
    content    TEXT   NOT NULL DEFAULT '',
    data       JSON, -- only: postgres
    data       TEXT, -- only: sqlite
    created_at BIGINT NOT NULL,
    PRIMARY KEY (memory_key, seq)
);

CREATE TABLE audit (
    id               BIGSERIAL PRIMARY KEY, -- only: postgres
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- only: sqlite
    at               BIGINT NOT NULL,
    identity         TEXT   NOT NULL DEFAULT '',
    roles            JSON, -- only: postgres
    roles            TEXT, -- only: sqlite
    server           TEXT   NOT NULL DEFAULT '',
    tool             TEXT   NOT NULL DEFAULT '',
    args_fingerprint TEXT   NOT NULL DEFAULT '',
    decision         TEXT   NOT NULL DEFAULT '',
    approval_id      TEXT   NOT NULL DEFAULT '',
    outcome          TEXT   NOT NULL DEFAULT '',
    latency_ns       BIGINT NOT NULL DEFAULT 0,
    error            TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX audit_identity ON audit (identity, at);
CREATE INDEX audit_at ON audit (at);
