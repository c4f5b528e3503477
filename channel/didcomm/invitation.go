package didcomm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/hyperledger/aries-framework-go/pkg/client/outofband"

	"github.com/packbot/packbot/store"
)

// invitationRecord is the bot's one reusable invitation, kept so that it survives restarts: a
// QR code printed once keeps working.
type invitationRecord struct {
	Endpoint   string               `json:"endpoint"`
	Invitation outofband.Invitation `json:"invitation"`
}

const invitationKey = "invitation"

// invitation returns the agent's reusable out-of-band invitation, creating it on first use or
// when the public endpoint or the label changed (invitations made before stay valid).
func (a *agent) invitation(ctx context.Context) (*outofband.Invitation, error) {
	ns := a.cfg.Namespace + "packbot"
	r, err := a.cfg.Records.GetRecord(ctx, ns, invitationKey)
	if err == nil {
		var rec invitationRecord
		if err := json.Unmarshal(r.Value, &rec); err == nil && rec.Endpoint == a.cfg.Endpoint && rec.Invitation.Label == a.currentLabel() {
			return &rec.Invitation, nil
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("didcomm: load invitation: %w", err)
	}
	inv, err := a.oob.CreateInvitation(nil, outofband.WithLabel(a.currentLabel()))
	if err != nil {
		return nil, fmt.Errorf("didcomm: create invitation: %w", err)
	}
	b, err := json.Marshal(invitationRecord{Endpoint: a.cfg.Endpoint, Invitation: *inv})
	if err != nil {
		return nil, err
	}
	if err := a.cfg.Records.PutRecord(ctx, store.Record{Namespace: ns, Key: invitationKey, Value: b}); err != nil {
		return nil, fmt.Errorf("didcomm: save invitation: %w", err)
	}
	a.log.InfoContext(ctx, "didcomm invitation created", "id", inv.ID, "endpoint", a.cfg.Endpoint)
	return inv, nil
}

// InvitationURL encodes an invitation the way wallets scan it: base URL + ?oob=base64url(JSON).
func InvitationURL(base string, inv any) (string, error) {
	b, err := json.Marshal(inv)
	if err != nil {
		return "", err
	}
	return base + "?oob=" + base64.RawURLEncoding.EncodeToString(b), nil
}

// ParseInvitation reads an invitation from a URL (?oob= or ?c_i=, base64url with or without
// padding, or standard base64) or from its JSON.
func ParseInvitation(s string) (*outofband.Invitation, error) {
	s = strings.TrimSpace(s)
	raw := []byte(s)
	if !strings.HasPrefix(s, "{") {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("invitation: not a URL or JSON: %w", err)
		}
		enc := u.Query().Get("oob")
		if enc == "" {
			enc = u.Query().Get("c_i")
		}
		if enc == "" {
			return nil, errors.New("invitation: the URL has no ?oob= or ?c_i= parameter")
		}
		if raw, err = decodeBase64(enc); err != nil {
			return nil, fmt.Errorf("invitation: %w", err)
		}
	}
	var inv outofband.Invitation
	if err := json.Unmarshal(raw, &inv); err != nil {
		var syntax *json.SyntaxError
		if !strings.HasPrefix(s, "{") && (errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end")) {
			return nil, errors.New("invitation: the URL's invitation is cut short or damaged: copy the whole URL, " +
				"or fetch it again from the bot's /invitation?format=url")
		}
		return nil, fmt.Errorf("invitation: not an out-of-band invitation: %w", err)
	}
	if !strings.HasSuffix(inv.Type, "/out-of-band/1.0/invitation") && !strings.HasSuffix(inv.Type, "/out-of-band/1.1/invitation") {
		return nil, fmt.Errorf("invitation: unsupported type %q (want out-of-band 1.0 or 1.1)", inv.Type)
	}
	if len(inv.Services) == 0 {
		return nil, errors.New("invitation: no services")
	}
	return &inv, nil
}

// decodeBase64 accepts base64url and standard base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if b, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// InvitationEndpoint returns the DIDComm endpoint of an invitation's first service.
func InvitationEndpoint(s string) (string, error) {
	inv, err := ParseInvitation(s)
	if err != nil {
		return "", err
	}
	switch svc := inv.Services[0].(type) {
	case map[string]any:
		if ep, ok := svc["serviceEndpoint"].(string); ok && ep != "" {
			return ep, nil
		}
		if m, ok := svc["serviceEndpoint"].(map[string]any); ok {
			if ep, ok := m["uri"].(string); ok && ep != "" {
				return ep, nil
			}
		}
	case string:
		return "", fmt.Errorf("invitation: its service is the DID %s, which packbot cannot resolve", shortDID(svc))
	}
	return "", errors.New("invitation: its first service has no endpoint")
}

// currentLabel is the label invitations are made with.
func (a *agent) currentLabel() string {
	if l := a.label.Load(); l != nil {
		return *l
	}
	return a.cfg.Label
}
