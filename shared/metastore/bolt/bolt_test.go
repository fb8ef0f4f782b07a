package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metastoretest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) metastore.Store { return openTemp(t) })
}

// TestReopen checks that every kind of item survives Close and Open.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	chain := metastore.ChainID{Star: "star-1", Class: metastore.Standard}
	st := metastore.Stream{Name: "orders", ID: "0123456789abcdef0123456789abcdef", Class: metastore.Standard,
		Star: "star-1", CreatedMs: 42, RetentionMs: 7, State: metastore.StreamActive}
	ref := metastore.Ref{StreamID: st.ID, FirstSeq: 10, LastSeq: 19, FirstTsMs: 1, LastTsMs: 2, Bytes: 300,
		Locations: []metastore.Location{{Key: "chains/star-1/1/0", Offset: 60, Length: 300}}}
	ep := metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 4,
		Nonce: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	tok := metastore.Token{Hash: "00000000000000000000000000000000000000000000000000000000000000ff", Prefix: "o", Ops: []string{"read"}}
	steps := []error{
		func() error { _, err := s.CreateStream(ctx, st); return err }(),
		s.MintEpoch(ctx, chain, 0, ep),
		func() error {
			_, err := s.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 5})
			return err
		}(),
		s.PutRefs(ctx, chain, metastore.Cursor{Epoch: 1, Slot: 5}, []metastore.Ref{ref}),
		s.AdvanceCursor(ctx, chain, metastore.Checkpoint, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 5}),
		func() error {
			_, err := s.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 1, Slot: 5}, metastore.Cursor{Epoch: 1, Slot: 9})
			return err
		}(),
		s.PutToken(ctx, tok),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetStream(ctx, "orders"); err == nil {
		t.Fatal("get on a closed store succeeded")
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.GetStream(ctx, "orders"); err != nil || got != st {
		t.Fatalf("stream after reopen: %+v, %v", got, err)
	}
	if got, err := s.LastRef(ctx, st.ID); err != nil || !metastore.EqualRef(got, ref) {
		t.Fatalf("ref after reopen: %+v, %v", got, err)
	}
	want := metastore.NewHead(1)
	want.Checkpoint.Slot = 5
	want.Absorbing = metastore.Cursor{Epoch: 1, Slot: 9}
	if got, err := s.GetHead(ctx, chain); err != nil || got != want {
		t.Fatalf("head after reopen: %+v, %v", got, err)
	}
	if got, err := s.GetEpoch(ctx, chain, 1); err != nil || got.Nonce != ep.Nonce || got.Buckets[0] != "b" || got.Window != 4 {
		t.Fatalf("epoch after reopen: %+v, %v", got, err)
	}
	if got, err := s.GetToken(ctx, tok.Hash); err != nil || got.Prefix != "o" || len(got.Ops) != 1 || got.Ops[0] != "read" {
		t.Fatalf("token after reopen: %+v, %v", got, err)
	}
	// And it is still writable: the mint CAS sees the stored head.
	if err := s.MintEpoch(ctx, chain, 0, ep); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("mint over a reopened head: %v, want ErrConflict", err)
	}
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s2, err := Open(path); !errors.Is(err, ErrLocked) {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("second Open of a held file: %v, want ErrLocked", err)
	}
}

// TestOpenWhenFree: a standby's open waits while the file is held, gives
// up with its context, and opens once the holder closes.
func TestOpenWhenFree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if s2, err := OpenWhenFree(ctx, path, 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("OpenWhenFree of a held file: %v, want the context's deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		s2, err := OpenWhenFree(context.Background(), path, 20*time.Millisecond)
		if err == nil {
			err = s2.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("OpenWhenFree returned %v while the file was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	released := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("opened %s after the holder closed", time.Since(released))
	case <-time.After(5 * time.Second):
		t.Fatal("OpenWhenFree did not open the released file")
	}
}

func TestOpenWrongVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(formatBucket)
		if err != nil {
			return err
		}
		return b.Put(versionKey, []byte("99"))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("Open of a version 99 file succeeded")
	}
}

// openEarlierBuild is a FROZEN COPY of the format check of Open in every
// build before the fence (Open is the same in every version of bolt.go
// from 0fd6eee to 87b98de): it opens only a file of format version "1".
// Do not update it: it stands for the binaries already out there.
func openEarlierBuild(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("metastore/bolt: open %s: %w", path, err)
	}
	defer db.Close()
	return db.Update(func(tx *bbolt.Tx) error {
		f, err := tx.CreateBucketIfNotExists([]byte("format"))
		if err != nil {
			return err
		}
		switch v := f.Get([]byte("version")); {
		case v == nil:
			return f.Put([]byte("version"), []byte("1"))
		case !bytes.Equal(v, []byte("1")):
			return fmt.Errorf("format version %q, want %q", v, "1")
		}
		_, err = tx.CreateBucketIfNotExists([]byte("items"))
		return err
	})
}

// TestSwitchFencesEarlierBuilds: setting a chain's indexed cursor moves
// the file to format version 2 in the same transaction, which a build
// before the fence refuses to open (a single-process store: the fence is
// against running an earlier binary on the file afterwards, which would
// take the indexed passes for refs passes); this build opens it and finds
// the head as it was. A file whose chain a build before the fence
// switched (version 1, indexed set) is moved to version 2 by Open.
func TestSwitchFencesEarlierBuilds(t *testing.T) {
	ctx := t.Context()
	chain := metastore.ChainID{Star: "star-1", Class: metastore.Standard}
	ep := metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 4}
	at := func(slot uint64) metastore.Cursor { return metastore.Cursor{Epoch: 1, Slot: slot} }
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MintEpoch(ctx, chain, 0, ep); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginAbsorb(ctx, chain, at(0), at(5)); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceCursor(ctx, chain, metastore.Checkpoint, at(0), at(5)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := openEarlierBuild(path); err != nil {
		t.Fatalf("an earlier build opens a file before the switch: %v", err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceCursor(ctx, chain, metastore.Indexed, metastore.Cursor{}, at(5)); err != nil {
		t.Fatal(err)
	}
	want, err := s.GetHead(ctx, chain)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	err = openEarlierBuild(path)
	if err == nil || !strings.Contains(err.Error(), `format version "2", want "1"`) {
		t.Fatalf("an earlier build opens a switched file: %v, want its format version error", err)
	}
	if s, err = Open(path); err != nil {
		t.Fatalf("this build opens a switched file: %v", err)
	}
	if got, err := s.GetHead(ctx, chain); err != nil || got != want {
		t.Fatalf("head after reopen: %+v, %v, want %+v", got, err, want)
	}
	s.Close()

	// A file switched by a build before the fence: version 1, a head
	// with the indexed cursor set.
	path = filepath.Join(t.TempDir(), "meta.db")
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if err := s.MintEpoch(ctx, chain, 0, ep); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		h := metastore.NewHead(1)
		h.Indexed = at(0)
		return put(tx.Bucket(itemsBucket), headKey(chain), h)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := openEarlierBuild(path); err != nil {
		t.Fatalf("an earlier build opens a version-1 file: %v", err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := openEarlierBuild(path); err == nil {
		t.Fatal("an earlier build opens a file with a switched chain after this build opened it")
	}
}
