-- An async sealer's batch: read 100 unsealed records, insert their 100 links into audit_seals, move a lane's head.
\set base random(1, 100000000) * 1000
SELECT a.id, a.at, a.identity, a.roles, a.server, a.tool, a.args_fingerprint, a.decision, a.approval_id, a.outcome, a.latency_ns, a.error, a.result_fingerprint, a.event, a.detail, a.mac FROM audit a WHERE a.id > (SELECT max(id) - 150 FROM audit) AND NOT EXISTS (SELECT 1 FROM audit_seals s WHERE s.id = a.id) ORDER BY a.id LIMIT 100;
WITH s AS (INSERT INTO audit_seals (id, lane, seq, prev_id, prev, hash) SELECT r.id + :base, 1, r.seq + :base, r.prev_id, r.prev, r.hash FROM json_to_recordset(:rows::json) AS r(i int, id bigint, seq bigint, prev_id bigint, prev text, hash text) RETURNING seq, id, hash)
UPDATE audit_lanes SET seq = t.seq, id = t.id, hash = t.hash FROM (SELECT seq, id, hash FROM s ORDER BY seq DESC LIMIT 1) t WHERE audit_lanes.lane = 2;
