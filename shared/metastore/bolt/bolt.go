package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/strandlog/strand/shared/metastore"
)

var (
	itemsBucket  = []byte("items")
	formatBucket = []byte("format")
	versionKey   = []byte("version")
	// formatVersion is the version of a file none of whose chains is
	// indexed; switchedVersion that of a file with one whose indexed
	// cursor is set (doc.go, "Fencing earlier builds"). Builds before the
	// fence open only formatVersion.
	formatVersion   = []byte("1")
	switchedVersion = []byte("2")
)

// lockTimeout bounds how long Open waits for another process's file lock.
const lockTimeout = time.Second

// Store is a metastore.Store in one bbolt file. It is safe for concurrent
// use.
type Store struct {
	db *bbolt.DB
}

var _ metastore.Store = (*Store)(nil)

// ErrLocked is returned (wrapped) by Open when another process holds the
// file's lock past the wait.
var ErrLocked = errors.New("metastore/bolt: the file is open in another process")

// Open opens the store at path, creating the file if it does not exist.
// It waits up to a second for another process's lock (ErrLocked).
func Open(path string) (*Store, error) { return open(path, lockTimeout) }

// OpenWhenFree opens the store at path as soon as no other process holds
// it, trying every poll (bbolt retries the lock every 50 ms within each
// try), until ctx ends (ctx's error). The operating system releases a
// process's lock when it exits, however it exits (kill -9 included), so
// this is how a standby learns, within about 50 ms, that the process it
// backs is gone (strand dev --standby; docs/adr/0050).
func OpenWhenFree(ctx context.Context, path string, poll time.Duration) (*Store, error) {
	for {
		s, err := open(path, poll)
		if !errors.Is(err, ErrLocked) {
			return s, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("metastore/bolt: wait for %s: %w", path, ctx.Err())
		}
	}
}

func open(path string, wait time.Duration) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: wait})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: open %s: no lock within %s", ErrLocked, path, wait)
	}
	if err != nil {
		return nil, fmt.Errorf("metastore/bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		f, err := tx.CreateBucketIfNotExists(formatBucket)
		if err != nil {
			return err
		}
		switch v := f.Get(versionKey); {
		case v == nil:
			if err := f.Put(versionKey, formatVersion); err != nil {
				return err
			}
		case !bytes.Equal(v, formatVersion) && !bytes.Equal(v, switchedVersion):
			return fmt.Errorf("format version %q, want %q or %q", v, formatVersion, switchedVersion)
		}
		items, err := tx.CreateBucketIfNotExists(itemsBucket)
		if err != nil {
			return err
		}
		// A chain switched by a build before the fence: fence the file now.
		switched, err := anyIndexed(items)
		if err != nil || !switched {
			return err
		}
		return f.Put(versionKey, switchedVersion)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("metastore/bolt: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file. Calls after Close fail.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("metastore/bolt: close: %w", err)
	}
	return nil
}

// Keys.

func itemKey(pk, sk string) []byte { return []byte(pk + "\x00" + sk) }

func streamKey(name string) []byte { return itemKey(metastore.StreamPK(name), metastore.MetaSK) }

// deletingKey is the key of deleting stream id's item (off its name).
func deletingKey(id string) []byte { return itemKey(metastore.DeletingPK, id) }

func refKey(id string, seq uint64) []byte { return itemKey(metastore.RefPK(id), metastore.RefSK(seq)) }

// refPrefix is the key prefix of all of stream id's refs.
func refPrefix(id string) []byte { return itemKey(metastore.RefPK(id), metastore.RefSKPrefix) }

func headKey(c metastore.ChainID) []byte { return itemKey(metastore.ChainPK(c), metastore.HeadSK) }

func epochKey(c metastore.ChainID, e uint64) []byte {
	return itemKey(metastore.ChainPK(c), metastore.EpochSK(e))
}

func tokenKey(hash string) []byte { return itemKey(metastore.TokenPK(hash), metastore.MetaSK) }

// Transactions.

// view runs fn in a read transaction on the items bucket.
func (s *Store) view(ctx context.Context, op string, fn func(b *bbolt.Bucket) error) error {
	return s.inTx(ctx, op, s.db.View, func(tx *bbolt.Tx) error { return fn(tx.Bucket(itemsBucket)) })
}

// update runs fn in one write transaction on the items bucket: all of fn's
// writes land, durably, or none do.
func (s *Store) update(ctx context.Context, op string, fn func(b *bbolt.Bucket) error) error {
	return s.inTx(ctx, op, s.db.Update, func(tx *bbolt.Tx) error { return fn(tx.Bucket(itemsBucket)) })
}

// inTx runs fn in a transaction of kind tx (View or Update), wrapping any
// error with the operation.
func (s *Store) inTx(ctx context.Context, op string, tx func(func(*bbolt.Tx) error) error, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("metastore/bolt: %s: %w", op, err)
	}
	if err := tx(fn); err != nil {
		return fmt.Errorf("metastore/bolt: %s: %w", op, err)
	}
	return nil
}

// get decodes the item at key into v; found is false when there is none.
func get(b *bbolt.Bucket, key []byte, v any) (found bool, err error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("decode item %q: %w", key, err)
	}
	return true, nil
}

func put(b *bbolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode item %q: %w", key, err)
	}
	return b.Put(key, data)
}

// Streams.

// CreateStream implements metastore.Store.
func (s *Store) CreateStream(ctx context.Context, st metastore.Stream) (metastore.Stream, error) {
	if err := metastore.ValidateStream(st); err != nil {
		return metastore.Stream{}, err
	}
	var cur metastore.Stream
	err := s.update(ctx, "create stream "+st.Name, func(b *bbolt.Bucket) error {
		found, err := get(b, streamKey(st.Name), &cur)
		if err != nil {
			return err
		}
		if found {
			return metastore.ErrExists
		}
		cur = st
		return put(b, streamKey(st.Name), st)
	})
	if err != nil && !errors.Is(err, metastore.ErrExists) {
		return metastore.Stream{}, err
	}
	return cur, err
}

// GetStream implements metastore.Store.
func (s *Store) GetStream(ctx context.Context, name string) (metastore.Stream, error) {
	return getItem[metastore.Stream](s, ctx, "get stream "+name, streamKey(name))
}

// ListStreams implements metastore.Store.
func (s *Store) ListStreams(ctx context.Context, prefix, startAfter string, limit int) ([]metastore.Stream, string, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, "", err
	}
	var out []metastore.Stream
	next := ""
	err := s.view(ctx, "list streams", func(b *bbolt.Bucket) error {
		keyPrefix := []byte(metastore.StreamPK(prefix))
		seek := keyPrefix
		if startAfter > prefix {
			seek = []byte(metastore.StreamPK(startAfter))
		}
		var err error
		out, next, err = pageStreams(b, keyPrefix, seek, startAfter, limit, func(k []byte) (string, error) {
			pk, _, ok := strings.Cut(string(k), "\x00")
			if !ok {
				return "", fmt.Errorf("malformed key %q", k)
			}
			return strings.TrimPrefix(pk, metastore.StreamPrefix), nil
		}, func(st metastore.Stream) string { return st.Name })
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// pageStreams decodes, from seek on, the stream items whose keys start
// with keyPrefix and whose name (nameOf the key) is after startAfter: at
// most limit, next keyOf the page's last when one more follows, else "".
func pageStreams(b *bbolt.Bucket, keyPrefix, seek []byte, startAfter string, limit int,
	nameOf func(k []byte) (string, error), keyOf func(metastore.Stream) string) ([]metastore.Stream, string, error) {
	var out []metastore.Stream
	c := b.Cursor()
	for k, v := c.Seek(seek); k != nil && bytes.HasPrefix(k, keyPrefix); k, v = c.Next() {
		name, err := nameOf(k)
		if err != nil {
			return nil, "", err
		}
		if name <= startAfter {
			continue
		}
		if len(out) == limit {
			return out, keyOf(out[limit-1]), nil
		}
		var st metastore.Stream
		if err := json.Unmarshal(v, &st); err != nil {
			return nil, "", fmt.Errorf("decode item %q: %w", k, err)
		}
		out = append(out, st)
	}
	return out, "", nil
}

// SetStreamState implements metastore.Store. StreamDeleting moves the
// stream's item from its name to deletingKey, in one transaction.
func (s *Store) SetStreamState(ctx context.Context, name, id string, state metastore.StreamState) error {
	if err := metastore.ValidateStreamState(state); err != nil {
		return err
	}
	return s.update(ctx, "set state of stream "+name, func(b *bbolt.Bucket) error {
		var st metastore.Stream
		retired := b.Get(deletingKey(id)) != nil
		found, err := get(b, streamKey(name), &st)
		switch {
		case err != nil:
			return err
		case retired && state == metastore.StreamDeleting:
			return nil // again
		case retired:
			return fmt.Errorf("deleting is final: %w", metastore.ErrConflict)
		case !found:
			return metastore.ErrNotFound
		case st.ID != id:
			return fmt.Errorf("id is %s, not %s: %w", st.ID, id, metastore.ErrConflict)
		case st.State == metastore.StreamDeleting && state != metastore.StreamDeleting:
			return fmt.Errorf("deleting is final: %w", metastore.ErrConflict)
		}
		st.State = state
		if state != metastore.StreamDeleting {
			return put(b, streamKey(name), st)
		}
		if err := b.Delete(streamKey(name)); err != nil {
			return err
		}
		return put(b, deletingKey(id), st)
	})
}

// ListDeleting implements metastore.Store: a cursor over deletingKey's
// prefix.
func (s *Store) ListDeleting(ctx context.Context, startAfter string, limit int) ([]metastore.Stream, string, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, "", err
	}
	var out []metastore.Stream
	next := ""
	err := s.view(ctx, "list deleting streams", func(b *bbolt.Bucket) error {
		prefix := deletingKey("")
		var err error
		out, next, err = pageStreams(b, prefix, deletingKey(startAfter), startAfter, limit,
			func(k []byte) (string, error) { return string(k[len(prefix):]), nil },
			func(st metastore.Stream) string { return st.ID })
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// DeleteStream implements metastore.Store.
func (s *Store) DeleteStream(ctx context.Context, name, id string) error {
	return s.update(ctx, "delete stream "+name, func(b *bbolt.Bucket) error {
		if err := b.Delete(deletingKey(id)); err != nil {
			return err
		}
		var st metastore.Stream
		found, err := get(b, streamKey(name), &st)
		if err != nil || !found || st.ID != id {
			return err // another id: a new stream took the name
		}
		return b.Delete(streamKey(name))
	})
}

// Refs.

// PutRefs implements metastore.Store. The lease check and every write run
// in one transaction, so the batch lands whole or not at all.
func (s *Store) PutRefs(ctx context.Context, chain metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	if err := metastore.ValidateChain(chain); err != nil {
		return err
	}
	if err := metastore.ValidatePass(pass); err != nil {
		return err
	}
	if err := metastore.ValidatePutRefs(refs); err != nil {
		return err
	}
	if len(refs) == 0 {
		return nil
	}
	op := fmt.Sprintf("put %d refs of pass to %s on chain %s", len(refs), pass, chain)
	return s.update(ctx, op, func(b *bbolt.Bucket) error {
		if err := headHolds(b, chain, func(h metastore.Head) error { return metastore.PassCurrent(h, pass) }); err != nil {
			return err
		}
		for _, r := range refs {
			if err := put(b, refKey(r.StreamID, r.FirstSeq), r); err != nil {
				return err
			}
		}
		return nil
	})
}

// headHolds checks cond on chain's head: a chain never minted has no head,
// and so no lease and no settled cursor to hold (ErrConflict).
func headHolds(b *bbolt.Bucket, chain metastore.ChainID, cond func(metastore.Head) error) error {
	var h metastore.Head
	found, err := get(b, headKey(chain), &h)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("no head: %w", metastore.ErrConflict)
	}
	return cond(h)
}

// floor returns the last item whose key starts with prefix and is at or
// before target (target starts with prefix), or nil.
func floor(c *bbolt.Cursor, prefix, target []byte) (k, v []byte) {
	k, v = c.Seek(target)
	if k != nil && bytes.Equal(k, target) {
		return k, v
	}
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil, nil
	}
	return k, v
}

func decodeRef(k, v []byte) (metastore.Ref, error) {
	var r metastore.Ref
	if err := json.Unmarshal(v, &r); err != nil {
		return metastore.Ref{}, fmt.Errorf("decode item %q: %w", k, err)
	}
	return r, nil
}

// QueryRefs implements metastore.Store. It relies on a stream's refs not
// overlapping: the only ref that starts before fromSeq and may reach it is
// the last one that starts at or before it.
func (s *Store) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, err
	}
	var out []metastore.Ref
	err := s.view(ctx, "query refs of stream "+streamID, func(b *bbolt.Bucket) error {
		prefix, from := refPrefix(streamID), refKey(streamID, fromSeq)
		if k, v := floor(b.Cursor(), prefix, from); k != nil && !bytes.Equal(k, from) {
			r, err := decodeRef(k, v)
			if err != nil {
				return err
			}
			if r.LastSeq >= fromSeq {
				out = append(out, r)
			}
		}
		c := b.Cursor()
		k, v := c.Seek(from)
		var err error
		out, err = refPage(out, prefix, k, v, c.Next, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LastRef implements metastore.Store.
func (s *Store) LastRef(ctx context.Context, streamID string) (metastore.Ref, error) {
	var r metastore.Ref
	err := s.view(ctx, "last ref of stream "+streamID, func(b *bbolt.Bucket) error {
		prefix := refPrefix(streamID)
		// Above every 20-digit seq: '9' repeated is more than the largest uint64.
		top := append(bytes.Clone(prefix), strings.Repeat("9", 20)...)
		k, v := floor(b.Cursor(), prefix, top)
		if k == nil {
			return metastore.ErrNotFound
		}
		var err error
		r, err = decodeRef(k, v)
		return err
	})
	if err != nil {
		return metastore.Ref{}, err
	}
	return r, nil
}

// refPage appends to out the stream's refs (keys under prefix) from k, v
// on, stepping with next, as DynamoDB pages a Query: it stops at limit
// refs or once the refs it read reach MaxQueryBytes (metastore.QueryPage).
func refPage(out []metastore.Ref, prefix, k, v []byte, next func() ([]byte, []byte), limit int) ([]metastore.Ref, error) {
	for size := 0; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit && size < metastore.MaxQueryBytes; k, v = next() {
		r, err := decodeRef(k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		size += metastore.RefSize(r)
	}
	return out, nil
}

// RefsBefore implements metastore.Store: the refs below beforeSeq's key,
// walked backward, cut as DynamoDB's page (metastore.QueryPage).
func (s *Store) RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]metastore.Ref, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, err
	}
	var out []metastore.Ref
	err := s.view(ctx, "refs of stream "+streamID+" before a seq", func(b *bbolt.Bucket) error {
		prefix, before := refPrefix(streamID), refKey(streamID, beforeSeq)
		c := b.Cursor()
		k, v := c.Seek(before) // the first key at or after it: step back
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		var err error
		out, err = refPage(out, prefix, k, v, c.Prev, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SwapRefs implements metastore.Store.
func (s *Store) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	if err := metastore.ValidateSwap(old, repl); err != nil {
		return err
	}
	op := fmt.Sprintf("swap %d refs of stream %s at %d-%d", len(old), repl.StreamID, repl.FirstSeq, repl.LastSeq)
	return s.update(ctx, op, func(b *bbolt.Bucket) error {
		for _, o := range old {
			var cur metastore.Ref
			found, err := get(b, refKey(o.StreamID, o.FirstSeq), &cur)
			if err != nil {
				return err
			}
			if !found || !metastore.EqualRef(cur, o) {
				return fmt.Errorf("ref at %d changed or gone: %w", o.FirstSeq, metastore.ErrConflict)
			}
		}
		for _, o := range old[1:] {
			if err := b.Delete(refKey(o.StreamID, o.FirstSeq)); err != nil {
				return err
			}
		}
		return put(b, refKey(repl.StreamID, repl.FirstSeq), repl)
	})
}

// SettleRef implements metastore.Store: the head's settled cursor, the
// old refs (or the key) and the writes in one transaction.
func (s *Store) SettleRef(ctx context.Context, chain metastore.ChainID, settled metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	if err := metastore.ValidateChain(chain); err != nil {
		return err
	}
	if err := metastore.ValidateSettleRef(old, repl); err != nil {
		return err
	}
	op := fmt.Sprintf("settle ref of stream %s at %d-%d on chain %s", repl.StreamID, repl.FirstSeq, repl.LastSeq, chain)
	return s.update(ctx, op, func(b *bbolt.Bucket) error {
		if err := headHolds(b, chain, func(h metastore.Head) error { return metastore.SettleCurrent(h, settled) }); err != nil {
			return err
		}
		var getErr error
		err := metastore.SettleOn(old, repl, func(i int) (metastore.Ref, bool) {
			k := refKey(repl.StreamID, repl.FirstSeq)
			if i >= 0 {
				k = refKey(old[i].StreamID, old[i].FirstSeq)
			}
			var cur metastore.Ref
			found, err := get(b, k, &cur)
			if err != nil {
				getErr = err
			}
			return cur, found
		})
		if getErr != nil {
			return getErr
		}
		if err != nil {
			return err
		}
		if err := settleApart(b, old, repl); err != nil {
			return err
		}
		for _, o := range old {
			if err := b.Delete(refKey(o.StreamID, o.FirstSeq)); err != nil {
				return err
			}
		}
		return put(b, refKey(repl.StreamID, repl.FirstSeq), repl)
	})
}

// settleApart reads repl's neighbours for metastore.SettleApart: the ref
// keyed last below repl's first seq and the one keyed first above
// metastore.SettleReach.
func settleApart(b *bbolt.Bucket, old []metastore.Ref, repl metastore.Ref) error {
	prefix := refPrefix(repl.StreamID)
	// ref decodes the item at k if it is one of the stream's refs.
	ref := func(k, v []byte) (metastore.Ref, bool, error) {
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return metastore.Ref{}, false, nil
		}
		r, err := decodeRef(k, v)
		return r, err == nil, err
	}
	c := b.Cursor()
	k, v := c.Seek(refKey(repl.StreamID, repl.FirstSeq))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	before, hasBefore, err := ref(k, v)
	if err != nil {
		return err
	}
	reach := refKey(repl.StreamID, metastore.SettleReach(old, repl))
	if k, v = c.Seek(reach); k != nil && bytes.Equal(k, reach) {
		k, v = c.Next()
	}
	next, hasNext, err := ref(k, v)
	if err != nil {
		return err
	}
	return metastore.SettleApart(repl, before, hasBefore, next, hasNext)
}

// DeleteRefs implements metastore.Store. The checks and every delete run
// in one transaction, so the batch lands whole or not at all.
func (s *Store) DeleteRefs(ctx context.Context, refs []metastore.Ref) error {
	if err := metastore.ValidateDeleteRefs(refs); err != nil {
		return err
	}
	if len(refs) == 0 {
		return nil
	}
	return s.update(ctx, fmt.Sprintf("delete %d refs", len(refs)), func(b *bbolt.Bucket) error {
		for _, r := range refs {
			var cur metastore.Ref
			found, err := get(b, refKey(r.StreamID, r.FirstSeq), &cur)
			if err != nil {
				return err
			}
			if err := metastore.DeleteOn(cur, found, r); err != nil {
				return err
			}
		}
		for _, r := range refs {
			if err := b.Delete(refKey(r.StreamID, r.FirstSeq)); err != nil {
				return err
			}
		}
		return nil
	})
}

// RaiseFloor implements metastore.Store.
func (s *Store) RaiseFloor(ctx context.Context, name, id string, floor uint64) error {
	return s.update(ctx, "raise the floor of stream "+name, func(b *bbolt.Bucket) error {
		var st metastore.Stream
		found, err := get(b, streamKey(name), &st)
		if err != nil {
			return err
		}
		st, changed, err := metastore.RaiseFloorOn(st, found, name, id, floor)
		if err != nil || !changed {
			return err
		}
		return put(b, streamKey(name), st)
	})
}

// SetStreamConfig implements metastore.Store.
func (s *Store) SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts metastore.Timestamping) error {
	return s.update(ctx, "set the config of stream "+name, func(b *bbolt.Bucket) error {
		var st metastore.Stream
		found, err := get(b, streamKey(name), &st)
		if err != nil {
			return err
		}
		st, err = metastore.SetConfigOn(st, found, name, id, retentionMs, ts)
		if err != nil {
			return err
		}
		return put(b, streamKey(name), st)
	})
}

// MoveStream implements metastore.Store.
func (s *Store) MoveStream(ctx context.Context, name, id, from, to string) error {
	return s.update(ctx, "move stream "+name, func(b *bbolt.Bucket) error {
		var st metastore.Stream
		found, err := get(b, streamKey(name), &st)
		if err != nil {
			return err
		}
		st, changed, err := metastore.MoveStreamOn(st, found, name, id, from, to)
		if err != nil || !changed {
			return err
		}
		return put(b, streamKey(name), st)
	})
}

// Chains.

// GetHead implements metastore.Store.
func (s *Store) GetHead(ctx context.Context, chain metastore.ChainID) (metastore.Head, error) {
	return getItem[metastore.Head](s, ctx, "get head of chain "+chain.String(), headKey(chain))
}

// anyIndexed reports whether a chain head in items has its indexed
// cursor set.
func anyIndexed(items *bbolt.Bucket) (bool, error) {
	c := items.Cursor()
	prefix := []byte(metastore.ChainPrefix)
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if !bytes.HasSuffix(k, []byte("\x00"+metastore.HeadSK)) {
			continue
		}
		var h metastore.Head
		if err := json.Unmarshal(v, &h); err != nil {
			return false, fmt.Errorf("decode item %q: %w", k, err)
		}
		if !h.Indexed.IsZero() {
			return true, nil
		}
	}
	return false, nil
}

// AdvanceCursor implements metastore.Store. Setting the indexed cursor
// also sets the file's format version to switchedVersion, in the same
// transaction, so that no build before the fence opens the file again.
func (s *Store) AdvanceCursor(ctx context.Context, chain metastore.ChainID, kind metastore.CursorKind, from, to metastore.Cursor) error {
	if err := metastore.ValidateAdvance(kind, from, to); err != nil {
		return err
	}
	op := fmt.Sprintf("advance %s cursor of chain %s from %s to %s", kind, chain, from, to)
	return s.updateHead(ctx, op, chain, func(tx *bbolt.Tx, h metastore.Head) (metastore.Head, error) {
		h, err := metastore.AdvanceOn(h, kind, from, to)
		if err == nil && kind == metastore.Indexed {
			err = tx.Bucket(formatBucket).Put(versionKey, switchedVersion)
		}
		return h, err
	})
}

// MoveCursors implements metastore.Store: one bolt transaction.
func (s *Store) MoveCursors(ctx context.Context, chain metastore.ChainID, moves []metastore.CursorMove) error {
	if err := metastore.ValidateMoves(moves); err != nil {
		return err
	}
	op := fmt.Sprintf("move cursors %v of chain %s", moves, chain)
	return s.updateHead(ctx, op, chain, func(_ *bbolt.Tx, h metastore.Head) (metastore.Head, error) {
		return metastore.MoveCursorsOn(h, moves)
	})
}

// updateHead reads chain's head, and stores what decide makes of it, in
// one transaction (ErrNotFound: no head; decide's error: nothing
// stored).
func (s *Store) updateHead(ctx context.Context, op string, chain metastore.ChainID, decide func(tx *bbolt.Tx, h metastore.Head) (metastore.Head, error)) error {
	return s.inTx(ctx, op, s.db.Update, func(tx *bbolt.Tx) error {
		b := tx.Bucket(itemsBucket)
		var h metastore.Head
		found, err := get(b, headKey(chain), &h)
		switch {
		case err != nil:
			return err
		case !found:
			return metastore.ErrNotFound
		}
		if h, err = decide(tx, h); err != nil {
			return err
		}
		return put(b, headKey(chain), h)
	})
}

// BeginAbsorb implements metastore.Store.
func (s *Store) BeginAbsorb(ctx context.Context, chain metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	if err := metastore.ValidateBeginAbsorb(from, to); err != nil {
		return metastore.Head{}, err
	}
	var h metastore.Head
	op := fmt.Sprintf("begin absorb %s-%s on chain %s", from, to, chain)
	err := s.update(ctx, op, func(b *bbolt.Bucket) error {
		found, err := get(b, headKey(chain), &h)
		switch {
		case err != nil:
			return err
		case !found:
			return metastore.ErrNotFound
		}
		h, err = metastore.BeginAbsorbOn(h, from, to)
		if err != nil {
			return err
		}
		return put(b, headKey(chain), h)
	})
	if err != nil && !errors.Is(err, metastore.ErrConflict) {
		return metastore.Head{}, err
	}
	return h, err
}

// MintEpoch implements metastore.Store.
func (s *Store) MintEpoch(ctx context.Context, chain metastore.ChainID, prev uint64, e metastore.Epoch) error {
	if err := metastore.ValidateChain(chain); err != nil {
		return err
	}
	if err := metastore.ValidateMint(prev, e); err != nil {
		return err
	}
	if err := metastore.CheckEpochSize(chain, e); err != nil {
		return err
	}
	op := fmt.Sprintf("mint epoch %d of chain %s after %d", e.Epoch, chain, prev)
	return s.update(ctx, op, func(b *bbolt.Bucket) error {
		var h metastore.Head
		found, err := get(b, headKey(chain), &h)
		if err != nil {
			return err
		}
		if h.Epoch != prev {
			return fmt.Errorf("head is at %d: %w", h.Epoch, metastore.ErrConflict)
		}
		if b.Get(epochKey(chain, e.Epoch)) != nil {
			return fmt.Errorf("epoch exists: %w", metastore.ErrConflict)
		}
		if found {
			h.Epoch = e.Epoch
		} else {
			h = metastore.NewHead(e.Epoch)
		}
		if err := put(b, epochKey(chain, e.Epoch), e); err != nil {
			return err
		}
		return put(b, headKey(chain), h)
	})
}

// GetEpoch implements metastore.Store.
func (s *Store) GetEpoch(ctx context.Context, chain metastore.ChainID, epoch uint64) (metastore.Epoch, error) {
	return getItem[metastore.Epoch](s, ctx, fmt.Sprintf("get epoch %d of chain %s", epoch, chain), epochKey(chain, epoch))
}

// UpdateEpoch implements metastore.Store.
func (s *Store) UpdateEpoch(ctx context.Context, chain metastore.ChainID, from metastore.EpochState, e metastore.Epoch) error {
	if err := metastore.ValidateEpochUpdate(from, e); err != nil {
		return err
	}
	op := fmt.Sprintf("update epoch %d of chain %s", e.Epoch, chain)
	return s.update(ctx, op, func(b *bbolt.Bucket) error {
		var cur metastore.Epoch
		found, err := get(b, epochKey(chain, e.Epoch), &cur)
		switch {
		case err != nil:
			return err
		case !found:
			return metastore.ErrNotFound
		case cur.State != from:
			return fmt.Errorf("state is %d, not %d: %w", cur.State, from, metastore.ErrConflict)
		}
		cur.State, cur.Cut = e.State, e.Cut
		return put(b, epochKey(chain, e.Epoch), cur)
	})
}

// Tokens.

// PutToken implements metastore.Store.
func (s *Store) PutToken(ctx context.Context, t metastore.Token) error {
	if err := metastore.ValidateToken(t); err != nil {
		return err
	}
	return s.update(ctx, "put token", func(b *bbolt.Bucket) error {
		return put(b, tokenKey(t.Hash), t)
	})
}

// GetToken implements metastore.Store.
func (s *Store) GetToken(ctx context.Context, hash string) (metastore.Token, error) {
	return getItem[metastore.Token](s, ctx, "get token", tokenKey(hash))
}

// DeleteToken implements metastore.Store.
func (s *Store) DeleteToken(ctx context.Context, hash string) error {
	return s.update(ctx, "delete token", func(b *bbolt.Bucket) error {
		return b.Delete(tokenKey(hash))
	})
}

// ListTokens implements metastore.Store: the TOKEN# keys are contiguous and
// in hash order.
func (s *Store) ListTokens(ctx context.Context, prefix string) ([]metastore.Token, error) {
	var out []metastore.Token
	err := s.view(ctx, "list tokens", func(b *bbolt.Bucket) error {
		keyPrefix := []byte(metastore.TokenPrefix)
		c := b.Cursor()
		for k, v := c.Seek(keyPrefix); k != nil && bytes.HasPrefix(k, keyPrefix); k, v = c.Next() {
			var t metastore.Token
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode item %q: %w", k, err)
			}
			if strings.HasPrefix(t.Prefix, prefix) {
				out = append(out, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// getItem reads the item at key: metastore.ErrNotFound when absent.
func getItem[T any](s *Store, ctx context.Context, op string, key []byte) (T, error) {
	var v T
	err := s.view(ctx, op, func(b *bbolt.Bucket) error {
		found, err := get(b, key, &v)
		if err == nil && !found {
			err = metastore.ErrNotFound
		}
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
