package credential

import (
	_ "embed" // the packbot JSON-LD context
	"fmt"

	"github.com/hyperledger/aries-framework-go/component/storageutil/mem"
	"github.com/hyperledger/aries-framework-go/pkg/doc/ld"
	"github.com/hyperledger/aries-framework-go/pkg/doc/ldcontext"
	"github.com/hyperledger/aries-framework-go/pkg/doc/ldcontext/embed"
	ldstore "github.com/hyperledger/aries-framework-go/pkg/store/ld"
)

// JSON-LD context URLs that packbot documents use. All of them are embedded in the binary.
const (
	// ContextURL is packbot's own JSON-LD context. Its only definition is an "@vocab", so that
	// any credential type or attribute a pack names (EmployeeCredential, email, roles…) expands
	// to an IRI and is covered by the signature instead of being silently dropped.
	ContextURL = "https://packbot.dev/credentials/v1"

	// vocab is the "@vocab" of [ContextURL], which new credentials carry inline.
	vocab = ContextURL + "#"

	contextCredentialsV1 = "https://www.w3.org/2018/credentials/v1"
	contextEd25519v2020  = "https://w3id.org/security/suites/ed25519-2020/v1"
	contextSubmissionV1  = "https://identity.foundation/presentation-exchange/submission/v1"
)

//go:embed contexts/packbot-credentials-v1.jsonld
var packbotContext []byte

// newDocumentLoader returns a JSON-LD document loader that knows afgo's embedded contexts plus
// packbot's, and nothing else: remote loading stays off (no ld.WithRemoteDocumentLoader), so an
// unknown context fails with ld.ErrContextNotFound instead of a network fetch. A fresh loader per
// operation keeps the package free of shared mutable state; building one costs a few milliseconds.
func newDocumentLoader() (*ld.DocumentLoader, error) {
	sp := mem.NewProvider()
	cs, err := ldstore.NewContextStore(sp)
	if err != nil {
		return nil, fmt.Errorf("open context store: %w", err)
	}
	rs, err := ldstore.NewRemoteProviderStore(sp)
	if err != nil {
		return nil, fmt.Errorf("open remote provider store: %w", err)
	}
	l, err := ld.NewDocumentLoader(loaderStores{cs, rs}, ld.WithExtraContexts(ldcontext.Document{
		URL:     ContextURL,
		Content: packbotContext,
	}))
	if err != nil {
		return nil, fmt.Errorf("load JSON-LD contexts: %w", err)
	}
	return l, nil
}

// loaderStores is the provider ld.NewDocumentLoader asks for.
type loaderStores struct {
	contexts ldstore.ContextStore
	remote   ldstore.RemoteProviderStore
}

func (s loaderStores) JSONLDContextStore() ldstore.ContextStore               { return s.contexts }
func (s loaderStores) JSONLDRemoteProviderStore() ldstore.RemoteProviderStore { return s.remote }

// knownContext reports whether url is one of the embedded contexts.
func knownContext(url string) bool {
	if url == ContextURL {
		return true
	}
	for _, c := range embed.Contexts {
		if c.URL == url {
			return true
		}
	}
	return false
}

// checkContexts walks a decoded JSON document and fails on the first "@context" (or "@import")
// reference that is not embedded, so that the caller gets a clear reason instead of a JSON-LD
// processing error deep inside a signature check.
func checkContexts(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "@context" || k == "@import" {
				if err := checkContextValue(x); err != nil {
					return err
				}
			}
			if err := checkContexts(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range t {
			if err := checkContexts(x); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkContextValue(v any) error {
	switch t := v.(type) {
	case string:
		if !knownContext(t) {
			return fmt.Errorf("context %q is not embedded (remote contexts are never fetched): %w", clip(t), ErrUnknownContext)
		}
	case []any:
		for _, x := range t {
			if err := checkContextValue(x); err != nil {
				return err
			}
		}
	}
	return nil // inline context objects are walked by checkContexts
}
