package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
	"github.com/packbot/packbot/channel/vsagent"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rollout"
	"github.com/packbot/packbot/store"
)

// channelOptions choose and configure the wallet channel.
type channelOptions struct {
	kind      string
	publicURL string
	maxBody   int64
}

func (o *channelOptions) bind(f *pflag.FlagSet) {
	f.Int64Var(&o.maxBody, "max-body-bytes", 0, "largest inbound message or webhook (env PACKBOT_MAX_BODY_BYTES, default 1 MiB)")
	f.StringVar(&o.kind, "channel", "", "wallet channel: didcomm (embedded agent) or vsagent (env PACKBOT_CHANNEL; default vsagent when VS_AGENT_ADMIN_URL is set, else didcomm)")
	f.StringVar(&o.publicURL, "public-url", "", "URL where wallets reach this server (env PACKBOT_PUBLIC_URL, default http://<--http address>)")
}

// channelDeps is what a channel factory gets.
type channelDeps struct {
	app       *app
	pack      *packs.Pack
	records   store.Records
	storeKind string
	dataDir   string
	publicURL string
	maxBody   int64
	// webhookSecret is PACKBOT_WEBHOOK_SECRET (checked), required of the VS Agent's webhooks.
	webhookSecret string
	// undelivered counts the messages the channel could not deliver, by reason (nil: not counted).
	undelivered func(reason string)
}

// channelFactory opens a channel.
type channelFactory func(ctx context.Context, d channelDeps) (channel.Channel, error)

// channelFactories maps a channel name to its constructor (explicit, no init registration).
var channelFactories = map[string]channelFactory{
	"didcomm": openDIDComm,
	"vsagent": openVSAgent,
}

// maxBodyBytes is --max-body-bytes, else PACKBOT_MAX_BODY_BYTES, else 0 (the channel's default).
func (o *channelOptions) maxBodyBytes(a *app) (int64, error) {
	if o.maxBody != 0 {
		return o.maxBody, nil
	}
	v := a.getenv("PACKBOT_MAX_BODY_BYTES")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("PACKBOT_MAX_BODY_BYTES %q: want a positive number of bytes", v)
	}
	return n, nil
}

func (o *channelOptions) resolve(a *app) string {
	if k := firstNonEmpty(o.kind, a.getenv("PACKBOT_CHANNEL")); k != "" {
		return k
	}
	if a.getenv("VS_AGENT_ADMIN_URL") != "" {
		return "vsagent"
	}
	return "didcomm"
}

func openDIDComm(ctx context.Context, d channelDeps) (channel.Channel, error) {
	key, source, err := didcommKey(d.app, d.dataDir, d.storeKind)
	if err != nil {
		return nil, err
	}
	var proofTimeout time.Duration
	if v := d.app.getenv("PACKBOT_PROOF_TIMEOUT"); v != "" {
		if proofTimeout, err = time.ParseDuration(v); err != nil || proofTimeout <= 0 {
			return nil, fmt.Errorf("PACKBOT_PROOF_TIMEOUT %q: want a positive duration such as 5m", v)
		}
	}
	ch, err := didcomm.Open(ctx, didcomm.Config{
		Records:      d.records,
		PublicURL:    d.publicURL,
		Label:        rollout.Label(d.pack),
		Profile:      channel.Profile{DisplayName: firstNonEmpty(d.pack.Metadata.DisplayName, "packbot"), Description: d.pack.Metadata.Description},
		MasterKey:    key,
		MaxBodyBytes: d.maxBody,
		Logger:       d.app.logger,
		Undelivered:  d.undelivered,
		ProofTimeout: proofTimeout,
	})
	if errors.Is(err, didcomm.ErrMasterKey) {
		return nil, fmt.Errorf("%s does not unlock the DIDComm keys already in the store (%s): set %s to the key "+
			"this store was first used with (replicas must share one key); a store's DIDComm keys cannot be "+
			"re-locked, so a new key needs a new store, and wallets a new invitation", source, d.storeKind, EnvDIDCommKey)
	}
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func openVSAgent(_ context.Context, d channelDeps) (channel.Channel, error) {
	admin := d.app.getenv("VS_AGENT_ADMIN_URL")
	if admin == "" {
		return nil, errors.New("channel vsagent: set VS_AGENT_ADMIN_URL to the VS Agent's admin API")
	}
	ch, err := vsagent.New(vsagent.Config{AdminURL: admin, MaxBodyBytes: d.maxBody, WebhookSecret: d.webhookSecret,
		Logger: d.app.logger.With("component", "vsagent")})
	if err != nil {
		return nil, fmt.Errorf("channel vsagent: %w", err)
	}
	return ch, nil
}

// channelProblem says why pack p cannot work on the channel kind, with the fix; "" when it can.
// The embedded didcomm channel verifies W3C credentials only: a pack whose authentication
// names only an AnonCreds credential definition (the Hologram production shape) would fail at
// every login.
func channelProblem(p *packs.Pack, kind string) string {
	a := p.Flows.Authentication
	if kind != "didcomm" || !a.Enabled || a.CredentialDefinitionID == "" || a.Credential != nil {
		return ""
	}
	return fmt.Sprintf("%s: flows.authentication.credentialDefinitionId: %q is an AnonCreds credential definition, "+
		"which the embedded didcomm channel cannot verify; run the vsagent channel (set VS_AGENT_ADMIN_URL, or "+
		"--channel vsagent / PACKBOT_CHANNEL=vsagent), or describe a W3C credential for didcomm instead: "+
		"flows.authentication.credential: {type: EmployeeCredential, issuers: [did:key:…]}", p.Source, a.CredentialDefinitionID)
}

// EnvDIDCommKey holds the master key of the DIDComm agent (64 hex characters).
const EnvDIDCommKey = "PACKBOT_DIDCOMM_KEY"

// didcommKey returns the key that locks the DIDComm agent's private keys in the store:
// PACKBOT_DIDCOMM_KEY, else a key file in the data folder, created on first use. Replicas that
// share PostgreSQL must share the key, so with PostgreSQL a key file is a warning.
// The second result names where the key came from, for messages.
func didcommKey(a *app, dataDir, storeKind string) ([]byte, string, error) {
	if v := a.getenv(EnvDIDCommKey); v != "" {
		k, err := hex.DecodeString(strings.TrimSpace(v))
		if err != nil || len(k) != 32 {
			return nil, "", fmt.Errorf("%s: want 64 hexadecimal characters (packbot keys gen prints one)", EnvDIDCommKey)
		}
		return k, EnvDIDCommKey, nil
	}
	path := filepath.Join(dataDir, "didcomm.key")
	if storeKind == "postgres" {
		a.logger.Warn("DIDComm keys are locked with a key file in the data folder; replicas sharing the database need the same "+EnvDIDCommKey,
			slog.String("file", path))
	}
	k, err := keyFile(path)
	return k, "the key file " + path, err
}

// keyFile reads a 32-byte hex key file, creating it (0600) when missing.
func keyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) { // another process created it meanwhile
			return keyFile(path)
		}
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		_, werr := f.WriteString(hex.EncodeToString(k) + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("%s: not a 64-hex-character key", path)
	}
	return k, nil
}
