package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

var lifecycleTests = []test{
	{"PingAndVersion", testPing},
	{"Closed", testClosed},
}

func testPing(t *testing.T, s store.Store) {
	check(t, s.Ping(t.Context()))
	v, err := s.SchemaVersion(t.Context())
	check(t, err)
	if v < 1 {
		t.Fatalf("schema version %d, want at least 1", v)
	}
}

func testClosed(t *testing.T, s store.Store) {
	check(t, s.Close())
	check(t, s.Close()) // idempotent
	ctx := t.Context()
	k := store.CredentialKey{Identity: "alice", Server: "github", Kind: store.KindConfig}
	calls := map[string]func() error{
		"Ping": func() error { return s.Ping(ctx) },
		"SchemaVersion": func() error {
			_, err := s.SchemaVersion(ctx)
			return err
		},
		"GetSession": func() error {
			_, err := s.GetSession(ctx, "c1")
			return err
		},
		"UpdateSession": func() error {
			_, err := s.UpdateSession(ctx, "c1", func(s store.Session) (store.Session, error) {
				t.Error("update ran after Close")
				return s, nil
			})
			return err
		},
		"DeleteSession": func() error { return s.DeleteSession(ctx, "c1") },
		"SessionsByIdentity": func() error {
			_, err := s.SessionsByIdentity(ctx, "alice")
			return err
		},
		"PutRecord": func() error { return s.PutRecord(ctx, store.Record{Namespace: "n", Key: "k"}) },
		"GetRecord": func() error {
			_, err := s.GetRecord(ctx, "n", "k")
			return err
		},
		"DeleteRecord": func() error { return s.DeleteRecord(ctx, "n", "k") },
		"QueryRecords": func() error {
			_, err := s.QueryRecords(ctx, "n", store.TagFilter{Name: "t", AnyValue: true})
			return err
		},
		"BatchRecords":  func() error { return s.BatchRecords(ctx, "n", []store.RecordOp{{Key: "k"}}) },
		"PutCredential": func() error { return s.PutCredential(ctx, credential("alice", "github", store.KindConfig)) },
		"GetCredential": func() error {
			_, err := s.GetCredential(ctx, k)
			return err
		},
		"UpdateCredential": func() error {
			_, err := s.UpdateCredential(ctx, k, func(c store.Credential) (store.Credential, error) {
				t.Error("update ran after Close")
				return c, nil
			})
			return err
		},
		"DeleteCredentials": func() error { return s.DeleteCredentials(ctx, "alice", "github", "") },
		"ListCredentials": func() error {
			_, err := s.ListCredentials(ctx, store.CredentialQuery{})
			return err
		},
		"EnqueueOutbox": func() error {
			_, err := s.EnqueueOutbox(ctx, due("alice", t0))
			return err
		},
		"ClaimOutbox": func() error {
			_, err := s.ClaimOutbox(ctx, store.OutboxClaim{Now: t0, Lease: time.Minute, Limit: 1})
			return err
		},
		"AckOutbox":   func() error { return s.AckOutbox(ctx, 1) },
		"RetryOutbox": func() error { return s.RetryOutbox(ctx, 1, t0, "closed") },
		"PendingOutbox": func() error {
			_, err := s.PendingOutbox(ctx, "alice")
			return err
		},
		"AppendMemory": func() error { return s.AppendMemory(ctx, "alice", entries(1, 1), 0) },
		"LoadMemory": func() error {
			_, err := s.LoadMemory(ctx, "alice", 0)
			return err
		},
		"ClearMemory": func() error { return s.ClearMemory(ctx, "alice") },
		"AppendAudit": func() error {
			_, err := s.AppendAudit(ctx, call("alice", "github", "t", t0))
			return err
		},
		"ListAudit": func() error {
			_, err := s.ListAudit(ctx, store.AuditQuery{})
			return err
		},
	}
	for name, f := range calls {
		if err := f(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: error %v, want %v", name, err, store.ErrClosed)
		}
	}
}
