package didcomm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	spi "github.com/hyperledger/aries-framework-go/spi/storage"

	"github.com/packbot/packbot/store"
)

// storageProvider keeps aries-framework-go's stores (connections, DID documents, KMS keys,
// protocol state) in packbot's store, so that both backends hold them, a restart keeps every
// connection, and replicas sharing PostgreSQL share them. Each afgo store is a namespace of
// store.Records, prefixed so that two agents (the bot and a test wallet) can share one database.
//
// afgo's storage interface has no context; each operation runs under the provider's lifecycle
// context with a timeout.
type storageProvider struct {
	records store.Records
	prefix  string
	ctx     context.Context // the agent's lifecycle context
	timeout time.Duration

	mu   sync.Mutex
	open map[string]*storageStore
}

const (
	storeConfigNamespace = "__store_config"
	storageOpTimeout     = 30 * time.Second
)

func newStorageProvider(ctx context.Context, records store.Records, prefix string) *storageProvider {
	return &storageProvider{records: records, prefix: prefix, ctx: ctx, timeout: storageOpTimeout, open: make(map[string]*storageStore)}
}

func (p *storageProvider) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.ctx, p.timeout)
}

// OpenStore opens (creating when needed) the store named name; names are case-insensitive.
func (p *storageProvider) OpenStore(name string) (spi.Store, error) {
	if name == "" {
		return nil, errors.New("store name is empty")
	}
	name = strings.ToLower(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.open[name]; ok {
		return s, nil
	}
	s := &storageStore{p: p, name: name, ns: p.prefix + name}
	p.open[name] = s
	return s, nil
}

// SetStoreConfig records the tag names of a store; the store must be open.
func (p *storageProvider) SetStoreConfig(name string, config spi.StoreConfiguration) error {
	name = strings.ToLower(name)
	p.mu.Lock()
	_, ok := p.open[name]
	p.mu.Unlock()
	if !ok {
		return spi.ErrStoreNotFound
	}
	for _, t := range config.TagNames {
		if strings.Contains(t, ":") {
			return fmt.Errorf("tag name %q contains ':'", t)
		}
	}
	ctx, cancel := p.opCtx()
	defer cancel()
	return p.records.PutRecord(ctx, store.Record{
		Namespace: p.prefix + storeConfigNamespace,
		Key:       name,
		Value:     []byte(strings.Join(config.TagNames, "\n")),
	})
}

// GetStoreConfig returns what SetStoreConfig recorded.
func (p *storageProvider) GetStoreConfig(name string) (spi.StoreConfiguration, error) {
	name = strings.ToLower(name)
	ctx, cancel := p.opCtx()
	defer cancel()
	r, err := p.records.GetRecord(ctx, p.prefix+storeConfigNamespace, name)
	if errors.Is(err, store.ErrNotFound) {
		p.mu.Lock()
		_, open := p.open[name]
		p.mu.Unlock()
		if open {
			return spi.StoreConfiguration{}, nil
		}
		return spi.StoreConfiguration{}, spi.ErrStoreNotFound
	}
	if err != nil {
		return spi.StoreConfiguration{}, fmt.Errorf("get store config %s: %w", name, err)
	}
	var cfg spi.StoreConfiguration
	if len(r.Value) > 0 {
		cfg.TagNames = strings.Split(string(r.Value), "\n")
	}
	return cfg, nil
}

// GetOpenStores returns the stores opened so far.
func (p *storageProvider) GetOpenStores() []spi.Store {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]spi.Store, 0, len(p.open))
	for _, s := range p.open {
		out = append(out, s)
	}
	return out
}

// Close forgets the open stores; the data stays in packbot's store.
func (p *storageProvider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = make(map[string]*storageStore)
	return nil
}

// storageStore is one afgo store: a namespace of records.
type storageStore struct {
	p    *storageProvider
	name string
	ns   string
}

func toTags(tags []spi.Tag) []store.Tag {
	out := make([]store.Tag, len(tags))
	for i, t := range tags {
		out[i] = store.Tag{Name: t.Name, Value: t.Value}
	}
	return out
}

func fromTags(tags []store.Tag) []spi.Tag {
	out := make([]spi.Tag, len(tags))
	for i, t := range tags {
		out[i] = spi.Tag{Name: t.Name, Value: t.Value}
	}
	return out
}

func checkPut(key string, value []byte, tags []spi.Tag) error {
	if key == "" {
		return errors.New("key is empty")
	}
	if value == nil {
		return errors.New("value is nil")
	}
	for _, t := range tags {
		if strings.Contains(t.Name, ":") || strings.Contains(t.Value, ":") {
			return fmt.Errorf("tag %q: names and values cannot contain ':' (it separates them in queries)", t.Name)
		}
	}
	return nil
}

// Put stores value under key, replacing its tags.
func (s *storageStore) Put(key string, value []byte, tags ...spi.Tag) error {
	if err := checkPut(key, value, tags); err != nil {
		return err
	}
	ctx, cancel := s.p.opCtx()
	defer cancel()
	return s.p.records.PutRecord(ctx, store.Record{Namespace: s.ns, Key: key, Value: value, Tags: toTags(tags)})
}

func (s *storageStore) get(key string) (store.Record, error) {
	if key == "" {
		return store.Record{}, errors.New("key is empty")
	}
	ctx, cancel := s.p.opCtx()
	defer cancel()
	r, err := s.p.records.GetRecord(ctx, s.ns, key)
	if errors.Is(err, store.ErrNotFound) {
		return store.Record{}, spi.ErrDataNotFound
	}
	return r, err
}

// Get returns the value under key, or spi.ErrDataNotFound.
func (s *storageStore) Get(key string) ([]byte, error) {
	r, err := s.get(key)
	return r.Value, err
}

// GetTags returns the tags of key, or spi.ErrDataNotFound.
func (s *storageStore) GetTags(key string) ([]spi.Tag, error) {
	r, err := s.get(key)
	if err != nil {
		return nil, err
	}
	return fromTags(r.Tags), nil
}

// GetBulk returns the values of keys in order, nil for missing ones.
func (s *storageStore) GetBulk(keys ...string) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := s.Get(k)
		switch {
		case errors.Is(err, spi.ErrDataNotFound):
		case err != nil:
			return nil, err
		default:
			out[i] = v
		}
	}
	return out, nil
}

// Query returns the records matching expression: "Name", "Name:Value", or several joined by
// "&&" (all must match). Paging and sorting options are not supported (afgo does not use them).
func (s *storageStore) Query(expression string, options ...spi.QueryOption) (spi.Iterator, error) {
	var opts spi.QueryOptions
	for _, o := range options {
		o(&opts)
	}
	if opts.InitialPageNum != 0 || opts.SortOptions != nil {
		return nil, errors.New("query: paging and sorting are not supported")
	}
	if expression == "" {
		return nil, errors.New("query: empty expression")
	}
	var filters []store.TagFilter
	for _, part := range strings.Split(expression, "&&") {
		name, value, hasValue := strings.Cut(part, ":")
		if name == "" || strings.Contains(value, ":") {
			return nil, fmt.Errorf("query: invalid expression %q", expression)
		}
		filters = append(filters, store.TagFilter{Name: name, Value: value, AnyValue: !hasValue})
	}
	ctx, cancel := s.p.opCtx()
	defer cancel()
	rs, err := s.p.records.QueryRecords(ctx, s.ns, filters...)
	if err != nil {
		return nil, err
	}
	return &iterator{records: rs, i: -1}, nil
}

// Delete removes key; a missing key is not an error.
func (s *storageStore) Delete(key string) error {
	if key == "" {
		return errors.New("key is empty")
	}
	ctx, cancel := s.p.opCtx()
	defer cancel()
	return s.p.records.DeleteRecord(ctx, s.ns, key)
}

// Batch applies operations in order in one transaction; a nil value deletes.
func (s *storageStore) Batch(operations []spi.Operation) error {
	if len(operations) == 0 {
		return errors.New("batch: no operations")
	}
	ops := make([]store.RecordOp, len(operations))
	for i, o := range operations {
		if o.Key == "" {
			return errors.New("batch: key is empty")
		}
		if o.Value == nil {
			ops[i] = store.RecordOp{Key: o.Key, Delete: true}
			continue
		}
		if err := checkPut(o.Key, o.Value, o.Tags); err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		ops[i] = store.RecordOp{Key: o.Key, Value: o.Value, Tags: toTags(o.Tags)}
	}
	ctx, cancel := s.p.opCtx()
	defer cancel()
	return s.p.records.BatchRecords(ctx, s.ns, ops)
}

// Flush does nothing: every write is already committed.
func (s *storageStore) Flush() error { return nil }

// Close removes the store from the open stores; the data stays. Closing twice is fine.
func (s *storageStore) Close() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.open, s.name)
	return nil
}

// iterator walks a query's results, loaded at once (afgo's queries are small).
type iterator struct {
	records []store.Record
	i       int
}

func (it *iterator) Next() (bool, error) {
	if it.i+1 >= len(it.records) {
		it.i = len(it.records)
		return false, nil
	}
	it.i++
	return true, nil
}

func (it *iterator) current() (store.Record, error) {
	if it.i < 0 || it.i >= len(it.records) {
		return store.Record{}, errors.New("iterator: no current entry")
	}
	return it.records[it.i], nil
}

func (it *iterator) Key() (string, error) {
	r, err := it.current()
	return r.Key, err
}

func (it *iterator) Value() ([]byte, error) {
	r, err := it.current()
	return r.Value, err
}

func (it *iterator) Tags() ([]spi.Tag, error) {
	r, err := it.current()
	return fromTags(r.Tags), err
}

func (it *iterator) TotalItems() (int, error) { return len(it.records), nil }

func (it *iterator) Close() error { return nil }

// Interface guards.
var (
	_ spi.Provider = (*storageProvider)(nil)
	_ spi.Store    = (*storageStore)(nil)
	_ spi.Iterator = (*iterator)(nil)
)
