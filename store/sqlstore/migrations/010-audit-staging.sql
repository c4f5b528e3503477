-- v10: PostgreSQL only. A store with an audit key inserts each record into audit_staging,
-- unsealed, with its MAC; SealAudit moves it into audit with its link and hash (or set aside,
-- seq -1, when its MAC is wrong). audit is so written once per record, by the sealer, instead of
-- inserted by the writer and updated by the sealer: that update wrote every index of audit a
-- second time. Records written unsealed into audit by v9 move to audit_staging.
CREATE TABLE audit_staging (LIKE audit INCLUDING DEFAULTS); -- only: postgres
ALTER TABLE audit_staging ADD PRIMARY KEY (id); -- only: postgres
INSERT INTO audit_staging SELECT * FROM audit WHERE seq = 0 AND mac <> ''; -- only: postgres
DELETE FROM audit WHERE seq = 0 AND mac <> ''; -- only: postgres
DROP INDEX audit_unsealed;
