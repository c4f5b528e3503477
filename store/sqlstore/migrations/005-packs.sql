-- v5: which authentication requirement a session's login satisfied, so that a pack swapped in
-- with another requirement logs the user out.

ALTER TABLE sessions ADD COLUMN login TEXT NOT NULL DEFAULT '';
