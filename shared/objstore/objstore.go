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
	// body is lent: once the call returns, the bucket neither keeps nor
	// reads it, and the caller may reuse it.
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

// ReaderInto is a Bucket that can read a range into a buffer its caller
// owns, so that a read made of parts (a settled location fetched as
// parallel ranged GETs) fills one buffer, with no buffer and no copy of
// its own per part. Optional: the function GetInto falls back to Get.
type ReaderInto interface {
	// GetInto reads up to len(dst) bytes of key at off into dst and
	// returns how many it read: fewer only when the object ends first.
	// Its errors are Get's (an off at or past the end: ErrRange).
	GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error)
}

// GetInto reads up to len(dst) bytes of key at off into dst: with b's own
// GetInto when it has one (ReaderInto), else by Get and a copy. A wrapper
// of a Bucket that changes what Get returns (fault injection) must not
// forward GetInto.
func GetInto(ctx context.Context, b Bucket, key string, off int64, dst []byte) (int, error) {
	if r, ok := b.(ReaderInto); ok {
		return r.GetInto(ctx, key, off, dst)
	}
	body, err := b.Get(ctx, key, off, int64(len(dst)))
	if err != nil {
		return 0, err
	}
	return copy(dst, body), nil
}

// Keeper is a Bucket that can keep the body a put hands it instead of a
// copy of it: an in-memory bucket, whose copy on every put is a cost no
// real bucket pays (issue 36: settle's objects in `strand bench`).
// Optional: the function PutGiven falls back to PutIfAbsent.
type Keeper interface {
	// KeepIfAbsent is PutIfAbsent, except that the bucket may keep body
	// itself as the object: the caller must not write body after the
	// call, whatever it returns.
	KeepIfAbsent(ctx context.Context, key string, body []byte) error
}

// PutGiven is PutIfAbsent of a body its caller gives up: with b's own
// KeepIfAbsent when it has one (Keeper), else PutIfAbsent. The caller
// must not write body after the call. A wrapper of a Bucket that changes
// what PutIfAbsent does (fault injection) must not forward KeepIfAbsent;
// one that only observes puts forwards it with PutGiven.
func PutGiven(ctx context.Context, b Bucket, key string, body []byte) error {
	if k, ok := b.(Keeper); ok {
		return k.KeepIfAbsent(ctx, key, body)
	}
	return b.PutIfAbsent(ctx, key, body)
}

// Viewer is a Bucket that can hand out the bytes it holds instead of a
// copy of them: an in-memory bucket, whose copy on every read is a cost
// no real bucket's read pays beyond its own buffer (issue 36: settle's
// reads in `strand bench`). Optional: the function View falls back to
// Get.
type Viewer interface {
	// View is Get, except that the bytes returned may be the bucket's
	// own: the caller must not write them.
	View(ctx context.Context, key string, off, n int64) ([]byte, error)
}

// View reads n bytes at off (n < 0: to the end) for a caller that only
// reads them: with b's own View when it has one (Viewer), else Get. The
// caller must not write the bytes returned. A wrapper of a Bucket that
// changes what Get returns forwards View only by returning what it would
// return from Get (its own copy where it changes the bytes).
func View(ctx context.Context, b Bucket, key string, off, n int64) ([]byte, error) {
	if v, ok := b.(Viewer); ok {
		return v.View(ctx, key, off, n)
	}
	return b.Get(ctx, key, off, n)
}
