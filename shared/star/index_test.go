package star

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

func TestReadIndexServesTheTailWindow(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	ids := h.open(metastore.Standard, 2)
	for n := 0; n < 10; n++ {
		for _, id := range ids {
			if _, err := h.star.Append(context.Background(), id, recs(3, func(i int) []byte { return fmt.Appendf(nil, "%d", n*3+i) }), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, low, err := h.star.ReadIndex(ids[1], 7, 5, 1<<20)
	if err != nil || low != 0 || len(got) != 5 {
		t.Fatalf("%d records, low %d, %v", len(got), low, err)
	}
	for i, r := range got {
		if r.Seq != uint64(7+i) || string(r.Body) != fmt.Sprint(7+i) {
			t.Fatalf("record %d = seq %d %q", i, r.Seq, r.Body)
		}
	}
	// A byte limit smaller than one record still returns one.
	if got, _, _ := h.star.ReadIndex(ids[0], 29, 10, 1); len(got) != 1 || got[0].Seq != 29 {
		t.Fatalf("%+v", got)
	}
	// Past the tail: nothing. Absorbed flights leave the index and raise low.
	if got, _, _ := h.star.ReadIndex(ids[0], 30, 10, 1<<20); len(got) != 0 {
		t.Fatalf("read past the tail returned %d records", len(got))
	}
	l := h.star.loglets[metastore.Standard]
	l.mu.Lock()
	mid := l.released[len(l.released)/2]
	l.mu.Unlock()
	h.star.Absorbed(metastore.ChainID{Star: "star-0", Class: metastore.Standard}, metastore.Cursor{Epoch: 1, Slot: mid.slot})
	_, low, _ = h.star.ReadIndex(ids[0], 0, 100, 1<<20)
	if low == 0 || low >= 30 {
		t.Fatalf("after absorbing half the flights, low is %d", low)
	}
	tail, ch, err := h.star.Watch(ids[0])
	if err != nil || tail != 30 || ch == nil {
		t.Fatal(tail, err)
	}
}

// TestReadsTakeNoLogletLock: Tail, WatchStream and ReadIndex (with its
// decode of up to 1 MiB of records) complete while the loglet mutex, which
// the write path takes on every admission and release, is held: a read
// session's steps load the stream's published view instead. Regression
// test for issue 13 finding 11 (the decode ran under the mutex) and for
// issue 16's fan-out (100 tailing sessions took it four times per step;
// this test blocked before the views).
func TestReadsTakeNoLogletLock(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	if _, err := h.star.Append(context.Background(), id, recs(5, func(i int) []byte { return []byte("r") }), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	l := h.star.loglets[metastore.Standard]
	l.mu.Lock()
	type result struct {
		tail, watched uint64
		got           []SeqRecord
		err           error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.tail, _, r.err = h.star.Tail(id)
		if r.err == nil {
			r.watched, _, r.err = h.star.WatchStream(id)
		}
		if r.err == nil {
			r.got, _, r.err = h.star.ReadIndex(id, 0, 10, 1<<20)
		}
		done <- r
	}()
	var r result
	select {
	case r = <-done:
		l.mu.Unlock()
	case <-time.After(10 * time.Second):
		l.mu.Unlock()
		t.Fatal("a read blocked on the loglet mutex")
	}
	if r.err != nil || r.tail != 5 || r.watched != 5 || len(r.got) != 5 {
		t.Fatalf("tail %d, watched %d, %d records, %v", r.tail, r.watched, len(r.got), r.err)
	}
}

// TestReadIndexNeverSkipsARecord: when a record does not fit the byte
// limit, the read stops there; it never goes on to a smaller record of the
// next batch (the reader would continue past the skipped one).
func TestReadIndexNeverSkipsARecord(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	for _, bodies := range [][]string{{"small", strings.Repeat("big", 400)}, {"small"}} {
		rs := recs(len(bodies), func(i int) []byte { return []byte(bodies[i]) })
		if _, err := h.star.Append(context.Background(), id, rs, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := h.star.ReadIndex(id, 0, 10, 200)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Seq != uint64(i) {
			t.Fatalf("record %d has seq %d: the read skipped a record", i, r.Seq)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d records, want 1 (the big one does not fit 200 bytes)", len(got))
	}
}

// TestDecodeWindowMatchesPerRecordDecode: the window served from the
// batches' shared decoded records equals a record-by-record decode of
// their encodings, for every start, count and metered byte limit (records of mixed
// sizes across three batches), read twice (the second from the cache).
func TestDecodeWindowMatchesPerRecordDecode(t *testing.T) {
	var window []*batch
	seq := uint64(100)
	for bi, n := range []int{3, 1, 4} {
		rs := recs(n, func(i int) []byte { return []byte(strings.Repeat("x", 1+(bi*7+i*13)%40)) })
		size, err := format.ValidateBatch(rs)
		if err != nil {
			t.Fatal(err)
		}
		b := newBatch(nil, rs, size, 1)
		b.first = seq
		seq += uint64(n)
		window = append(window, b)
	}
	reference := func(from uint64, maxRecords, maxBytes int) []SeqRecord {
		var out []SeqRecord
		size := 0
		for _, b := range window {
			s := b.first
			for off := 0; off < len(b.enc); s++ {
				n := 4 + int(binary.BigEndian.Uint32(b.enc[off:]))
				if s >= from {
					rs, err := format.DecodeRecords(b.enc[off:off+n], 1)
					if err != nil {
						t.Fatal(err)
					}
					if len(out) >= maxRecords || (size+format.MeteredSize(rs[0]) > maxBytes && len(out) > 0) {
						return out
					}
					out = append(out, SeqRecord{Seq: s, Record: rs[0]})
					size += format.MeteredSize(rs[0])
				}
				off += n
			}
		}
		return out
	}
	for pass := 0; pass < 2; pass++ {
		for from := uint64(100); from <= seq; from++ {
			// Only batches that end after from, as ReadIndex passes them.
			i := 0
			for i < len(window) && window[i].first+uint64(window[i].recs) <= from {
				i++
			}
			for maxRecords := 1; maxRecords <= 9; maxRecords++ {
				for maxBytes := 1; maxBytes <= 400; maxBytes += 7 {
					got := decodeWindow(window[i:], from, maxRecords, maxBytes)
					want := reference(from, maxRecords, maxBytes)
					if len(got) != len(want) {
						t.Fatalf("from %d, %d records, %d bytes: %d records, want %d", from, maxRecords, maxBytes, len(got), len(want))
					}
					for k := range got {
						if got[k].Seq != want[k].Seq || string(got[k].Body) != string(want[k].Body) || got[k].TimestampMs != want[k].TimestampMs {
							t.Fatalf("from %d, %d records, %d bytes: record %d is %d %q, want %d %q", from, maxRecords, maxBytes, k, got[k].Seq, got[k].Body, want[k].Seq, want[k].Body)
						}
					}
				}
			}
		}
	}
}
