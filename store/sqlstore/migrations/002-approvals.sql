-- v2: approvals: requests for approval-gated tool calls, their approver roles and their votes.
-- A request leaves PENDING once, by one conditional UPDATE (… WHERE status = 'PENDING').
-- vote_count and approve_count count the request's rows in approval_votes; the statement that
-- inserts a vote updates them on the locked row, so the update that reaches the quorum sees
-- every earlier vote without a second read (and vote_count numbers the votes: approval_votes.seq).
-- approval_roles and approval_votes carry no foreign key: their rows are only written by the
-- statement that writes or updates their request (the roles with it, a vote by the update that
-- counts it), so they cannot dangle, and the checks cost about a tenth of each write. Whatever
-- deletes requests one day deletes their roles and votes too.

CREATE TABLE approvals (
    id             TEXT    NOT NULL PRIMARY KEY,
    server         TEXT    NOT NULL DEFAULT '',
    tool           TEXT    NOT NULL DEFAULT '',
    arguments      JSON, -- only: postgres
    arguments      TEXT, -- only: sqlite
    fingerprint    TEXT    NOT NULL DEFAULT '',
    description    TEXT    NOT NULL DEFAULT '',
    requester      TEXT    NOT NULL,
    requester_name TEXT    NOT NULL DEFAULT '',
    requester_conn TEXT    NOT NULL DEFAULT '',
    requester_lang TEXT    NOT NULL DEFAULT '',
    -- approver_roles is the list as given, read back with the row; approval_roles indexes it.
    approver_roles JSON, -- only: postgres
    approver_roles TEXT, -- only: sqlite
    quorum         INTEGER NOT NULL CHECK (quorum >= 1),
    allow_self     BOOLEAN NOT NULL DEFAULT FALSE,
    status         TEXT    NOT NULL,
    resolved_by    TEXT    NOT NULL DEFAULT '',
    created_at     BIGINT  NOT NULL,
    resolved_at    BIGINT  NOT NULL DEFAULT 0,
    expires_at     BIGINT  NOT NULL,
    vote_count     INTEGER NOT NULL DEFAULT 0,
    approve_count  INTEGER NOT NULL DEFAULT 0,
    exec           TEXT    NOT NULL DEFAULT '',
    exec_until     BIGINT  NOT NULL DEFAULT 0,
    result         BYTEA, -- only: postgres
    result         BLOB, -- only: sqlite
    error          TEXT    NOT NULL DEFAULT ''
);
-- A requester's open requests (the my-approval-requests badge and menu).
CREATE INDEX approvals_requester ON approvals (requester, status);
-- The pending requests, by expiry: the expiry sweep and the pending-approvals badge.
CREATE INDEX approvals_status ON approvals (status, expires_at);
-- Claimed executions by end of lease: the interrupted-execution sweep.
CREATE INDEX approvals_exec ON approvals (exec, exec_until);

CREATE TABLE approval_roles (
    approval_id TEXT NOT NULL,
    role        TEXT NOT NULL,
    PRIMARY KEY (approval_id, role)
);
-- role → requests: which requests a holder of a role may decide.
CREATE INDEX approval_roles_role ON approval_roles (role, approval_id);

CREATE TABLE approval_votes (
    approval_id TEXT    NOT NULL,
    approver    TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    decision    TEXT    NOT NULL CHECK (decision IN ('approve', 'reject')),
    at          BIGINT  NOT NULL,
    PRIMARY KEY (approval_id, approver)
);
