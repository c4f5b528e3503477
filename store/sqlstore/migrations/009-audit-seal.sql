-- v9: records sealed after their commit. A store with an audit key on PostgreSQL writes each
-- record unsealed (seq 0) with a MAC of its content; SealAudit links them into lane 1 soon
-- after, checking the MAC, and sets aside (seq -1) a record whose MAC is wrong.

ALTER TABLE audit ADD COLUMN mac TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_unsealed ON audit (id) WHERE seq = 0;
