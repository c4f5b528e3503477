package flows

import (
	"context"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// The interfaces below are what the flows use of the rest of packbot, each as small as the flows
// need; the concrete types (store.Store, *mcp.Pool, *approvals.Service, *agent.Model) satisfy
// them, and the flows' own tests use in-memory fakes. All methods may be called concurrently by
// the events of different connections.

// Store is what the engine keeps in the store besides the event's effects: the directory of
// roles, the sealed drafts of credential configuration, and chat memory (read).
type Store interface {
	// PutIdentity records a user's display name and roles at login (approvals read them).
	PutIdentity(ctx context.Context, id store.Identity) error
	// GetCredential, PutCredential and DeleteCredentials keep the sealed draft of the values
	// typed so far (kind store.KindDraft).
	GetCredential(ctx context.Context, k store.CredentialKey) (store.Credential, error)
	PutCredential(ctx context.Context, c store.Credential) error
	DeleteCredentials(ctx context.Context, identity, server, kind string) error
	MemoryReader
}

// Tools is the MCP tool pool as the flows see it: the catalog, the calls (through package
// toolcall), and the user-controlled servers' credentials.
type Tools interface {
	// Catalog is the current tool catalog and a channel closed when it changes.
	Catalog() (mcp.Catalog, <-chan struct{})
	Call(ctx context.Context, c mcp.Call) (mcp.Result, error)
	// Status says whether identity's credentials for server work.
	Status(ctx context.Context, identity, server string) (mcp.Status, error)
	// Configure tests values on server and keeps them when they work; the tools it lists.
	Configure(ctx context.Context, identity, server string, values map[string]secret.Value) ([]mcp.Tool, error)
	// Forget deletes identity's credentials for server.
	Forget(ctx context.Context, identity, server string) error
	// UserConfigAvailable: per-user credentials can be kept.
	UserConfigAvailable() bool
}

// Approvals runs approval requests ([approvals.Service] implements it). Submit, Cancel and
// Decide return, with the request, whose badges they changed: the flows return them as
// [Effects].Badges.
type Approvals interface {
	Submit(ctx context.Context, r approvals.Request) (approvals.Result, error)
	// Mine lists requester's pending requests; Decidable those c may decide.
	Mine(ctx context.Context, requester string) ([]store.Approval, error)
	Decidable(ctx context.Context, c rbac.Caller) ([]store.Approval, error)
	Get(ctx context.Context, id string) (store.Approval, error)
	Cancel(ctx context.Context, requester, id string) (approvals.Result, error)
	// Decide records a vote; one that reaches the quorum runs the call before it returns.
	Decide(ctx context.Context, approver rbac.Caller, id string, approve bool) (approvals.Result, error)
	// Summary is a request's argument summary for its approvers.
	Summary(a store.Approval) string
	// Counts are c's badge counts.
	Counts(ctx context.Context, c rbac.Caller) (mine, decidable int, err error)
}

// OAuthStarter begins an OAuth sign-in (mcp/oauth.Manager implements it).
type OAuthStarter interface {
	// Begin returns the URL the user opens to authorize identity on server.
	Begin(ctx context.Context, identity, server string) (string, error)
}

// Model is the LLM's tool loop ([agent.Model] implements it).
type Model interface {
	Run(ctx context.Context, t agent.Turn, exec agent.Executor) (agent.Reply, error)
}

// Interface guards.
var (
	_ Store     = store.Store(nil)
	_ Tools     = (*mcp.Pool)(nil)
	_ Approvals = (*approvals.Service)(nil)
	_ Model     = (*agent.Model)(nil)
)
