package objstore

import (
	"context"
	"errors"
)

// Sentinel errors. Implementations wrap them with the bucket and key.
var (
	// ErrExists: PutIfAbsent found an object already at the key.
	ErrExists = errors.New("objstore: object exists")
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("objstore: not found")
	// ErrRange: a Get offset at or past the end of the object.
	ErrRange = errors.New("objstore: range not satisfiable")
	// ErrAmbiguous: the write may or may not have landed; read it back.
	ErrAmbiguous = errors.New("objstore: ambiguous outcome")
	// ErrUnavailable: the bucket refused or failed the request (throttling,
	// 5xx, bucket down). Nothing was written. Retrying may succeed.
	ErrUnavailable = errors.New("objstore: unavailable")
)

// Bucket is one bucket of an object store. See the package documentation
// for the exact contract every implementation honours.
type Bucket interface {
	// Name is the bucket's name, as used in refs and logs.
	Name() string
	// PutIfAbsent creates key with body, only if key does not exist.
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	// Get reads n bytes at off (n < 0: to the end).
	Get(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Head returns the object's size in bytes.
	Head(ctx context.Context, key string) (int64, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys under prefix in lexical order. Tools only.
	List(ctx context.Context, prefix string) ([]string, error)
}
