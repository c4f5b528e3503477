package didcomm

import (
	"fmt"
	"sync"

	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"
	"github.com/hyperledger/aries-framework-go/pkg/doc/did"
	vdrapi "github.com/hyperledger/aries-framework-go/pkg/framework/aries/api/vdr"
	"github.com/hyperledger/aries-framework-go/pkg/vdr/peer"
	spi "github.com/hyperledger/aries-framework-go/spi/storage"
)

// peerCacheSize bounds the did:peer documents kept in memory (two per connection).
const peerCacheSize = 20_000

// cachedPeerVDR is afgo's did:peer VDR with the documents it has read kept in memory. afgo
// resolves both DIDs of a connection for every message it sends or receives, and each read is a
// store query plus a JSON-schema validation of the document: about a third of the CPU of a chat
// message. A peer DID's document only changes through Update or Deactivate, which forget it.
type cachedPeerVDR struct {
	*peer.VDR
	mu   sync.RWMutex
	docs map[string]*did.DocResolution
}

func newCachedPeerVDR(sp spi.Provider) (*cachedPeerVDR, error) {
	v, err := peer.New(sp)
	if err != nil {
		return nil, fmt.Errorf("didcomm: peer VDR: %w", err)
	}
	return &cachedPeerVDR{VDR: v, docs: make(map[string]*did.DocResolution)}, nil
}

// Read returns the document of id, from memory after the first read.
func (v *cachedPeerVDR) Read(id string, opts ...vdrapi.DIDMethodOption) (*did.DocResolution, error) {
	v.mu.RLock()
	r, ok := v.docs[id]
	v.mu.RUnlock()
	if ok {
		return r, nil
	}
	r, err := v.VDR.Read(id, opts...)
	if err != nil {
		return nil, err
	}
	primeDestination(r.DIDDocument)
	v.mu.Lock()
	if len(v.docs) >= peerCacheSize {
		for k := range v.docs { // drop an arbitrary entry; it is read again when needed
			delete(v.docs, k)
			break
		}
	}
	v.docs[id] = r
	v.mu.Unlock()
	return r, nil
}

// primeDestination makes the changes to doc that afgo's service.CreateDestination makes to the
// document it is given (a DIDComm service without "accept" gets the default one), before doc is
// shared: every caller gets the same cached document, and afgo's protocol goroutines and the
// send path make destinations from it at the same time (a data race the send stress found).
func primeDestination(doc *did.Doc) {
	if doc != nil {
		_, _ = service.CreateDestination(doc) // a document without a DIDComm service: nothing to prime
	}
}

func (v *cachedPeerVDR) forget(id string) {
	v.mu.Lock()
	delete(v.docs, id)
	v.mu.Unlock()
}

// Create stores a document (forgetting any cached one of the same id).
func (v *cachedPeerVDR) Create(doc *did.Doc, opts ...vdrapi.DIDMethodOption) (*did.DocResolution, error) {
	if doc != nil {
		v.forget(doc.ID)
	}
	return v.VDR.Create(doc, opts...)
}

// Update changes a document and forgets the cached copy.
func (v *cachedPeerVDR) Update(doc *did.Doc, opts ...vdrapi.DIDMethodOption) error {
	if doc != nil {
		v.forget(doc.ID)
	}
	return v.VDR.Update(doc, opts...)
}

// Deactivate deactivates a document and forgets the cached copy.
func (v *cachedPeerVDR) Deactivate(id string, opts ...vdrapi.DIDMethodOption) error {
	v.forget(id)
	return v.VDR.Deactivate(id, opts...)
}

var _ vdrapi.VDR = (*cachedPeerVDR)(nil)
