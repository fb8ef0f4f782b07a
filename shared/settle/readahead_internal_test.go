package settle

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// slowGets counts the Gets in flight at once (each takes a while, as
// S3's do) and the most seen.
type slowGets struct {
	objstore.Bucket
	in, most atomic.Int64
	gets     atomic.Int64
}

func (b *slowGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	in := b.in.Add(1)
	defer b.in.Add(-1)
	for m := b.most.Load(); in > m && !b.most.CompareAndSwap(m, in); m = b.most.Load() {
	}
	b.gets.Add(1)
	time.Sleep(5 * time.Millisecond)
	return b.Bucket.Get(ctx, key, off, n)
}

// readAheadLocs writes objs settled objects of 4 back to back locations
// of 1 KiB each (a span each) and returns the locations and their bytes.
func readAheadLocs(t *testing.T, b objstore.Bucket, objs int) ([]metastore.Location, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(36, 1))
	var locs []metastore.Location
	var want [][]byte
	for o := range objs {
		key := fmt.Sprintf("settled/obj-%03d", o)
		body := make([]byte, 100+4*1024)
		for i := range body {
			body[i] = byte(rng.UintN(256))
		}
		if err := b.PutIfAbsent(t.Context(), key, body); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			off := int64(100 + i*1024)
			locs = append(locs, metastore.Location{Settled: true, Key: key, Offset: off, Length: 1024})
			want = append(want, body[off:off+1024])
		}
	}
	return locs, want
}

// readAll reads every location of sp and checks it holds want's bytes.
func readAll(t *testing.T, sp *spanReader, want [][]byte) {
	t.Helper()
	for i, w := range want {
		got, _, _, err := sp.read()
		if err != nil {
			t.Fatalf("location %d: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("location %d: other bytes", i)
		}
	}
}

// TestSpanReaderReadsAhead: a flush's reads of one stream overlap (up to
// readAheadGets spans ahead of the one consumed), return every
// location's bytes in order, one GET per span, and give the budget back.
// Before the read-ahead one GET was in flight at a time.
func TestSpanReaderReadsAhead(t *testing.T) {
	b := &slowGets{Bucket: objstore.NewMem("settled")}
	locs, want := readAheadLocs(t, b.Bucket, 12)
	s := &Settler{Settled: b}
	sp := newSpanReader(t.Context(), s, chain.Set{}, locs, nil)
	readAll(t, sp, want)
	sp.close()
	if _, _, _, err := sp.read(); err == nil {
		t.Error("a read past the last location succeeded")
	}
	if m := b.most.Load(); m < 2 || m > readAheadGets+1 {
		t.Errorf("%d GETs in flight at most, want 2 to %d", m, readAheadGets+1)
	}
	if g := b.gets.Load(); g != 12 {
		t.Errorf("%d GETs, want one per span: 12", g)
	}
	if n := s.ahead.Load(); n != 0 {
		t.Errorf("%d bytes of read-ahead budget still taken", n)
	}
}

// TestSpanReaderBudget: a read-ahead that does not fit the budget is not
// started (one GET at a time when no span fits); a reader closed
// halfway gives back what its reads ahead took; a piece the step
// prefetched is taken from there, not read.
func TestSpanReaderBudget(t *testing.T) {
	t.Run("none fits", func(t *testing.T) {
		defer func(old int64) { readAheadBytes = old }(readAheadBytes)
		readAheadBytes = 4*1024 - 1
		b := &slowGets{Bucket: objstore.NewMem("settled")}
		locs, want := readAheadLocs(t, b.Bucket, 6)
		s := &Settler{Settled: b}
		sp := newSpanReader(t.Context(), s, chain.Set{}, locs, nil)
		defer sp.close()
		readAll(t, sp, want)
		if m := b.most.Load(); m != 1 {
			t.Errorf("%d GETs in flight at most, want 1", m)
		}
	})
	t.Run("closed halfway", func(t *testing.T) {
		b := &slowGets{Bucket: objstore.NewMem("settled")}
		locs, _ := readAheadLocs(t, b.Bucket, 12)
		s := &Settler{Settled: b}
		sp := newSpanReader(t.Context(), s, chain.Set{}, locs, nil)
		for range 5 {
			if _, _, _, err := sp.read(); err != nil {
				t.Fatal(err)
			}
		}
		// The span being consumed (read ahead) and readAheadGets after it.
		if n, most := s.ahead.Load(), int64(readAheadGets+1)*4*1024; n <= 0 || n > most {
			t.Errorf("%d bytes of budget taken while reading ahead, want 1 to %d", n, most)
		}
		sp.close()
		if n := s.ahead.Load(); n != 0 {
			t.Errorf("%d bytes of budget still taken after close", n)
		}
	})
	t.Run("prefetched", func(t *testing.T) {
		b := &slowGets{Bucket: objstore.NewMem("settled")}
		locs, want := readAheadLocs(t, b.Bucket, 1)
		l := locs[0]
		pf := &prefetched{pieces: map[piece][]byte{{key: l.Key, off: l.Offset, n: l.Length}: want[0]}}
		sp := newSpanReader(t.Context(), &Settler{Settled: b}, chain.Set{}, locs, pf)
		defer sp.close()
		readAll(t, sp, want)
		if g := b.gets.Load(); g != 1 {
			t.Errorf("%d GETs, want 1 (the first location prefetched, the other 3 one span)", g)
		}
	})
}
