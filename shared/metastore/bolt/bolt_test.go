package bolt

import (
	"errors"
	"path/filepath"
	"testing"

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
	if s2, err := Open(path); err == nil {
		s2.Close()
		t.Fatal("second Open of a held file succeeded")
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
