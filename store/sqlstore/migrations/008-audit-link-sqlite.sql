-- v8: SQLite only. A chained audit row is appended by one statement that reads its lane's head
-- and hashes the row (packbot_audit_hash, store.AuditHash registered with the driver), and this
-- trigger moves the head: it refuses a row that does not follow its lane's head or whose hash is
-- not its own, so a row cannot be chained wrongly by mistake. (PostgreSQL appends and moves the
-- head in its chain statement; see audit.go.)
CREATE TRIGGER audit_link AFTER INSERT ON audit WHEN NEW.seq > 0 BEGIN -- only: sqlite
    SELECT RAISE(ABORT, 'audit: the row does not follow its lane''s head') -- only: sqlite
    WHERE NOT EXISTS (SELECT 1 FROM audit_lanes l WHERE l.lane = NEW.lane AND l.seq = NEW.seq - 1 -- only: sqlite
        AND l.id = NEW.prev_id AND l.hash = NEW.prev); -- only: sqlite
    SELECT RAISE(ABORT, 'audit: the row''s hash is not its own') -- only: sqlite
    WHERE NEW.hash <> packbot_audit_hash(NEW.prev, NEW.lane, NEW.seq, NEW.id, NEW.prev_id, NEW.at, NEW.identity, -- only: sqlite
        NEW.roles, NEW.server, NEW.tool, NEW.args_fingerprint, NEW.decision, NEW.approval_id, NEW.outcome, NEW.latency_ns, -- only: sqlite
        NEW.error, NEW.result_fingerprint, NEW.event, NEW.detail); -- only: sqlite
    UPDATE audit_lanes SET seq = NEW.seq, id = NEW.id, hash = NEW.hash WHERE lane = NEW.lane; -- only: sqlite
END; -- only: sqlite
