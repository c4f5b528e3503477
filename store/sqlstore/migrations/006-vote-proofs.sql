-- v6: the digest of the presentation an approver made when deciding (a policy with fresh
-- proofs), kept with the vote; '' for a vote cast without one.

ALTER TABLE approval_votes ADD COLUMN proof TEXT NOT NULL DEFAULT '';
