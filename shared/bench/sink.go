package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/settle"
)

// errNotKept: a read of a settled stream object whose bytes the write
// workload's settled bucket did not keep (settledSink). Settle never
// reads one in a write run; if it does, the run fails with this rather
// than measure a read that returned nothing.
var errNotKept = errors.New("bench: settled object's bytes not kept in the write workload")

// sinkBelow: a per-stream settled object of at least this many bytes is
// kept as its size alone (settledSink). Settle reads a stream's last
// settled object back only to merge it, when its records are under
// MergeBelowBytes (the bench leaves settle's default); an object's
// header, segment header and CRC are 100 bytes, so one of this size
// holds at least that many bytes of records and is never read again.
const sinkBelow = settle.DefaultMergeBelowBytes + 4<<10

// settledSink is the write workload's settled bucket (S3 Standard): it
// keeps every object but the large per-stream settled objects
// (format.SettledKey, streams/...) whole, and of those their size (Head,
// List and PutIfAbsent's conditions stay exact; Get fails with
// errNotKept). The star's process never holds settled data (S3 does), and
// in the bench it did: 10 s at 450 MB/s is 4.5 GB of settled objects in
// the bench's heap, and fresh memory costs 1-4 s a GiB to touch on the
// virtual machines these figures come from (the default mode's slowdown,
// issue 36: docs/performance/ingest.md). The read workloads keep every
// byte (their readers read them).
type settledSink struct {
	objstore.Bucket
	sizes sync.Map // key -> int64: the objects kept as their size
}

var (
	_ objstore.Bucket     = (*settledSink)(nil)
	_ objstore.ReaderInto = (*settledSink)(nil)
	_ objstore.Viewer     = (*settledSink)(nil)
)

func sunk(key string, size int) bool {
	return size >= sinkBelow && strings.HasPrefix(key, "streams/")
}

// PutIfAbsent keeps a large stream object's size and an empty stand-in in
// the bucket (so that List and the key's existence are the bucket's own);
// the size goes first, so a racing put of the key loses there.
func (s *settledSink) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if !sunk(key, len(body)) {
		return s.Bucket.PutIfAbsent(ctx, key, body)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if _, loaded := s.sizes.LoadOrStore(key, int64(len(body))); loaded {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExists)
	}
	if err := s.Bucket.PutIfAbsent(ctx, key, nil); err != nil {
		s.sizes.Delete(key)
		return err
	}
	return nil
}

func (s *settledSink) size(key string) (int64, bool) {
	v, ok := s.sizes.Load(key)
	if !ok {
		return 0, false
	}
	return v.(int64), true
}

func (s *settledSink) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if _, ok := s.size(key); ok {
		return nil, fmt.Errorf("get %s: %w", key, errNotKept)
	}
	return s.Bucket.Get(ctx, key, off, n)
}

// View is Get without the copy when the bucket below has View (a flush
// reads a pack back only to copy its entries out): a Get copied every
// pack settle read back into new memory, a tenth of the default mode's
// page faults at 100 MB/s (issue 36).
func (s *settledSink) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if _, ok := s.size(key); ok {
		return nil, fmt.Errorf("get %s: %w", key, errNotKept)
	}
	return objstore.View(ctx, s.Bucket, key, off, n)
}

func (s *settledSink) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	if _, ok := s.size(key); ok {
		return 0, fmt.Errorf("get %s: %w", key, errNotKept)
	}
	return objstore.GetInto(ctx, s.Bucket, key, off, dst)
}

func (s *settledSink) Head(ctx context.Context, key string) (int64, error) {
	if n, ok := s.size(key); ok {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("head %s: %w", key, err)
		}
		return n, nil
	}
	return s.Bucket.Head(ctx, key)
}

func (s *settledSink) Delete(ctx context.Context, key string) error {
	if err := s.Bucket.Delete(ctx, key); err != nil {
		return err
	}
	s.sizes.Delete(key)
	return nil
}
