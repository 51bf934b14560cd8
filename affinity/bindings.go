package affinity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/caddy-ha/caddy-ha/store"
)

// ErrInvalidID is returned for an id ValidID refuses; the store is not asked.
var ErrInvalidID = errors.New("affinity: invalid upload id")

// ErrInvalidServer is returned by Bind for an empty server, or one longer
// than MaxServerLen.
var ErrInvalidServer = errors.New("affinity: invalid server address")

// ErrAlreadyBound is returned by Bind when the upload is bound to another
// server; the binding is left as it was.
var ErrAlreadyBound = errors.New("affinity: upload already bound to another server")

// MaxServerLen bounds a binding's value: a host:port, nothing more.
const MaxServerLen = 255

// Bindings records which server owns each upload, in a short-lived store
// shared by every proxy: key Prefix+id, value the server's host:port, living
// TTL after the last Bind or Owner. An upload nobody touches for TTL is
// forgotten, so abandoned uploads clean themselves up.
//
// A memory store keeps the server string it is given: passing the same
// string for the same server (from the upstream list, not rebuilt per
// request) lets every binding share it.
type Bindings struct {
	Store  store.Store
	Prefix string // e.g. "ua:", keeping bindings apart from other keys
	TTL    time.Duration
}

// Bind records that server owns the upload id. The first binding wins: if
// the upload is bound to another server, Bind returns ErrAlreadyBound (with
// the owner in the message) and changes nothing, because that server holds
// the chunks already received and moving the binding would strand them.
// Binding again to the same server renews the binding like Owner.
func (b *Bindings) Bind(ctx context.Context, id, server string) error {
	if !ValidID(id) {
		return ErrInvalidID
	}
	if server == "" || len(server) > MaxServerLen {
		return ErrInvalidServer
	}
	buf, key := b.key(id)
	defer keyBuffers.Put(buf)
	// Each retry follows a binding vanishing between two calls (expired or
	// unbound meanwhile); three in a row means something keeps removing it.
	for range 3 {
		added, err := b.Store.TryAdd(ctx, key, server, b.TTL)
		if err != nil || added {
			return err
		}
		owner, found, err := b.Store.GetAndTouch(ctx, key, b.TTL)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if owner != server {
			return fmt.Errorf("%w (%s)", ErrAlreadyBound, owner)
		}
		return nil
	}
	return fmt.Errorf("affinity: binding of upload %s kept vanishing", id)
}

// Owner returns the server the upload id is bound to, and whether it is,
// and renews the binding for another TTL, in one store call: each request
// of an upload asks, so an upload in progress never loses its binding. It
// never creates one.
func (b *Bindings) Owner(ctx context.Context, id string) (server string, found bool, err error) {
	if !ValidID(id) {
		return "", false, ErrInvalidID
	}
	buf, key := b.key(id)
	defer keyBuffers.Put(buf)
	return b.Store.GetAndTouch(ctx, key, b.TTL)
}

// Unbind forgets the binding of upload id, once it is completed or aborted.
// Unbinding an unbound upload is not an error.
func (b *Bindings) Unbind(ctx context.Context, id string) error {
	if !ValidID(id) {
		return ErrInvalidID
	}
	buf, key := b.key(id)
	defer keyBuffers.Put(buf)
	return b.Store.Remove(ctx, key)
}

// keyBuffers hold the keys being built: the store copies what it keeps
// (store.Store's contract), so a key's memory is reused by the next call
// instead of each lookup allocating one.
var keyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}

// key returns Prefix+id in a buffer from keyBuffers, valid until the caller
// puts the buffer back. Only validated ids get here, so a key is exactly the
// prefix followed by [A-Za-z0-9_-]{1,128}.
func (b *Bindings) key(id string) (buf *[]byte, key string) {
	buf = keyBuffers.Get().(*[]byte)
	*buf = append(append((*buf)[:0], b.Prefix...), id...)
	return buf, unsafe.String(unsafe.SliceData(*buf), len(*buf))
}
