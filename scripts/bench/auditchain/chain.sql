-- qAppendAuditPostgres (store/sqlstore/audit.go), its $1 as :src: one record appended to the chain.
-- Generated: go test ./store/sqlstore -run TestAuditChainBenchScript -update
WITH RECURSIVE au_src AS (SELECT * FROM json_to_recordset(:src::json) AS r(i int, at bigint, identity text, roles text, server text, tool text, args_fingerprint text,
	decision text, approval_id text, outcome text, latency_ns bigint, error text, result_fingerprint text, event text,
	detail text, mac text)), au_ids AS MATERIALIZED (SELECT s.*, nextval('audit_id_seq') AS id FROM au_src s),
	au_pick AS MATERIALIZED (SELECT audit_lane(COALESCE(
		(SELECT lane FROM audit_lanes ORDER BY lane LIMIT 1 FOR UPDATE SKIP LOCKED),
		(SELECT lane FROM audit_lanes ORDER BY random() LIMIT 1))) AS lane
		WHERE EXISTS (SELECT 1 FROM au_src)),
	au_head AS MATERIALIZED (SELECT l.lane, l.seq, l.id, l.hash FROM audit_lanes l JOIN au_pick p ON l.lane = p.lane FOR UPDATE OF l),
	au_chain (i, lane, seq, id, prev_id, prev, hash) AS (
		SELECT 0, lane, seq, id, 0::bigint, ''::text, hash FROM au_head
		UNION ALL
		SELECT r.i, c.lane, c.seq + 1, r.id, c.id, c.hash, encode(sha256(convert_to('packbot-audit-1' || '|' || length(c.hash) || ':' || c.hash || '|' || c.lane || '|' || (c.seq + 1) || '|' || r.id || '|' || c.id || '|' || r.at || '|' || length(r.identity) || ':' || r.identity || '|' || length(r.roles) || ':' || r.roles || '|' || length(r.server) || ':' || r.server || '|' || length(r.tool) || ':' || r.tool || '|' || length(r.args_fingerprint) || ':' || r.args_fingerprint || '|' || length(r.decision) || ':' || r.decision || '|' || length(r.approval_id) || ':' || r.approval_id || '|' || length(r.outcome) || ':' || r.outcome || '|' || r.latency_ns || '|' || length(r.error) || ':' || r.error || '|' || length(r.result_fingerprint) || ':' || r.result_fingerprint || '|' || length(r.event) || ':' || r.event || '|' || length(r.detail) || ':' || r.detail, 'UTF8')), 'hex')
		FROM au_chain c JOIN au_ids r ON r.i = c.i + 1),
	au_ins AS (INSERT INTO audit (id, lane, seq, prev_id, prev, hash, at, identity, roles, server, tool, args_fingerprint, decision, approval_id, outcome, latency_ns,
	error, result_fingerprint, event, detail)
		SELECT c.id, c.lane, c.seq, c.prev_id, c.prev, c.hash, r.at, r.identity, NULLIF(r.roles, '')::json, r.server,
			r.tool, r.args_fingerprint, r.decision, r.approval_id, r.outcome, r.latency_ns, r.error, r.result_fingerprint,
			r.event, r.detail
		FROM au_chain c JOIN au_ids r ON r.i = c.i WHERE c.i > 0
		RETURNING id, lane, seq, prev_id, prev, hash),
	au_adv AS (UPDATE audit_lanes SET seq = t.seq, id = t.id, hash = t.hash
		FROM (SELECT i, lane, seq, id, hash FROM au_chain ORDER BY i DESC LIMIT 1) t
		WHERE audit_lanes.lane = t.lane AND t.i > 0)
SELECT id, lane, seq, prev_id, prev, hash FROM au_ins ORDER BY id;
