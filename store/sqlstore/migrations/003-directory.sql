-- v3: the directory of users who logged in, with their roles as of their last login (approvers
-- are found by role while offline; a requester's roles are checked again when an approved call
-- runs).
CREATE TABLE identities (
    identity     TEXT   NOT NULL PRIMARY KEY,
    display_name TEXT   NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL
);

CREATE TABLE identity_roles (
    identity TEXT NOT NULL REFERENCES identities (identity) ON DELETE CASCADE,
    role     TEXT NOT NULL,
    PRIMARY KEY (identity, role)
);
CREATE INDEX identity_roles_by_role ON identity_roles (role, identity);
