package settle

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// mergeFixture writes `runs` level-1 runs of one epoch, each `slots`
// slots wide, to settled, with their packs sorted by stream: stream i is
// in run r unless (i+r)%skip == 0 (skip 0: always), with one segment of
// one record of recBytes(i, r) bytes, and a marker before its entry
// (flushing its previous seq) when mark(i, r); and a head whose settled
// cursor is at the last run's end. It returns the chain, the metastore and
// the pack bytes written. each (if not nil) sees every run (reused
// after it returns).
func mergeFixture(tb testing.TB, settled objstore.Bucket, streams, runs, slots, skip int, recBytes func(i, r int) int, mark func(i, r int) bool, each func(*format.PassIndex)) (metastore.ChainID, metastore.Store, int64) {
	tb.Helper()
	ctx := context.Background()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	meta := metastore.NewMem()
	if err := meta.MintEpoch(ctx, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		tb.Fatal(err)
	}
	seqs := make([]uint64, streams)
	var body []byte
	var packBytes int64
	run := format.PassIndex{Epoch: 1}
	var pack []byte
	for r := range runs {
		run.FirstSlot, run.EndSlot = uint64(slots*r), uint64(slots*r+slots)
		run.Streams, pack = run.Streams[:0], pack[:0]
		for i := range streams {
			if skip > 0 && (i+r)%skip == 0 {
				continue
			}
			var id format.StreamID
			binary.BigEndian.PutUint64(id[:], uint64(i)*0x9E3779B97F4A7C15)
			binary.BigEndian.PutUint64(id[8:], uint64(i))
			seq := seqs[i]
			if mark != nil && mark(i, r) && seq > 0 {
				run.Streams = append(run.Streams, format.PassStream{Stream: id, FirstSeq: seq - 1, LastSeq: seq - 1, FirstTsMs: int64(r), LastTsMs: int64(r)})
			}
			n := recBytes(i, r)
			if cap(body) < n {
				body = make([]byte, n)
			}
			rec := format.AppendRecord(nil, format.Record{TimestampMs: int64(r), Body: body[:n]})
			off := len(pack)
			var err error
			if pack, err = format.AppendSegment(pack, format.SegmentInfo{Stream: id, FirstSeq: seq, Count: 1}, rec); err != nil {
				tb.Fatal(err)
			}
			seg := pack[off:]
			run.Streams = append(run.Streams, format.PassStream{Stream: id, FirstSeq: seq, LastSeq: seq, FirstTsMs: int64(r), LastTsMs: int64(r), Bytes: int64(len(rec)),
				Segments: []format.PassSegment{{Slot: run.FirstSlot, FirstSeq: seq, Count: 1, Offset: uint32(off), Length: uint32(len(seg)), CRC: crcOf(seg)}}})
			seqs[i]++
		}
		slices.SortStableFunc(run.Streams, func(a, b format.PassStream) int { return strings.Compare(string(a.Stream[:]), string(b.Stream[:])) })
		// The pack in stream order, as a step that fits PackBufferBytes
		// writes it: re-lay the segments in the sorted order.
		sorted := make([]byte, 0, len(pack))
		for k := range run.Streams {
			for j := range run.Streams[k].Segments {
				g := &run.Streams[k].Segments[j]
				seg := pack[g.Offset : g.Offset+g.Length]
				g.Offset = uint32(len(sorted))
				sorted = append(sorted, seg...)
			}
		}
		packBytes += int64(len(sorted))
		if err := settled.PutIfAbsent(ctx, format.PackKey(c.Star, c.Class.String(), 1, run.FirstSlot, run.EndSlot, run.Digest, run.FirstSlot), sorted); err != nil {
			tb.Fatal(err)
		}
		obj, err := format.AppendPassIndex(nil, run)
		if err != nil {
			tb.Fatal(err)
		}
		if err := settled.PutIfAbsent(ctx, format.RunIndexKey(c.Star, c.Class.String(), 1, run.FirstSlot), obj); err != nil {
			tb.Fatal(err)
		}
		if each != nil {
			each(&run)
		}
	}
	end := metastore.Cursor{Epoch: 1, Slot: uint64(slots * runs)}
	for _, k := range []metastore.CursorKind{metastore.Checkpoint, metastore.Settled} {
		if err := meta.AdvanceCursor(ctx, c, k, metastore.Cursor{Epoch: 1}, end); err != nil {
			tb.Fatal(err)
		}
	}
	return c, meta, packBytes
}

// deadlineBucket is an invocation that runs out of time: after `puts`
// PutIfAbsent calls its writes fail with context.DeadlineExceeded.
type deadlineBucket struct {
	objstore.Bucket
	puts atomic.Int64
}

func (d *deadlineBucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if d.puts.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return d.Bucket.PutIfAbsent(ctx, key, body)
}

// TestMergeResumesAcrossInvocations: a merge whose invocations each run
// out of time after writing two of its packs (a cold settler each time,
// as a Lambda restarted after its timeout) completes in a bounded number
// of invocations, and its merged run and packs are byte for byte those of
// a merge never interrupted (whose inputs are read in other chunks).
// Before merges resumed, every invocation
// rewrote the same first packs and ran out of time again: the merge never
// completed (issue 17, "The hourly step at 1,000,000 streams").
func TestMergeResumesAcrossInvocations(t *testing.T) {
	defer SetMergeChunk(300)()
	const streams, runs, slots, maxBytes = 300, 4, 64, 1500
	recBytes := func(i, r int) int { return 10 + (i*31+r*17)%90 }
	mark := func(i, r int) bool { return (i*7+r)%11 == 0 }
	ctx := t.Context()
	// The reference: one merge, never interrupted.
	refBucket := objstore.NewMem("settled")
	c, refMeta, _ := mergeFixture(t, refBucket, streams, runs, slots, 3, recBytes, mark, nil)
	ref := &Settler{Meta: refMeta, Settled: refBucket, PassIndex: true, Fanout: runs, MaxObjectBytes: maxBytes}
	var refRes Result
	if ok, err := ref.merge(ctx, c, &refRes); err != nil || !ok {
		t.Fatalf("reference merge: %t, %v", ok, err)
	}
	if refRes.Packs < 10 {
		t.Fatalf("the reference merge wrote %d packs: want many", refRes.Packs)
	}
	// The interrupted merge reads its inputs' indexes in chunks of 7
	// entries (a stream's marker and packed entry split across chunks):
	// the same bytes.
	defer func(n uint32) { mergeIndexChunk = n }(mergeIndexChunk)
	mergeIndexChunk = 7
	bucket := objstore.NewMem("settled")
	_, meta, _ := mergeFixture(t, bucket, streams, runs, slots, 3, recBytes, mark, nil)
	const putsPerInvocation = 2
	invocations := 0
	for {
		invocations++
		if invocations > refRes.Packs/putsPerInvocation+2 {
			t.Fatalf("the merge has not completed after %d invocations of %d PUTs (%d packs)", invocations-1, putsPerInvocation, refRes.Packs)
		}
		db := &deadlineBucket{Bucket: bucket}
		db.puts.Store(putsPerInvocation)
		s := &Settler{Meta: meta, Settled: db, PassIndex: true, Fanout: runs, MaxObjectBytes: maxBytes}
		var res Result
		ok, err := s.merge(ctx, c, &res)
		if err == nil && ok {
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("invocation %d: %t, %v", invocations, ok, err)
		}
	}
	want, err := refBucket.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := bucket.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("keys differ:\n got %q\nwant %q", got, want)
	}
	for _, k := range want {
		a, _ := refBucket.Get(ctx, k, 0, -1)
		b, _ := bucket.Get(ctx, k, 0, -1)
		if string(a) != string(b) {
			t.Fatalf("%s differs from the uninterrupted merge's", k)
		}
	}
	if h, err := meta.GetHead(ctx, c); err != nil || h.Merged != (metastore.Cursor{Epoch: 1, Slot: runs * slots}) {
		t.Fatalf("head %+v, %v", h, err)
	}
	t.Logf("%d packs merged in %d invocations of %d PUTs", refRes.Packs, invocations, putsPerInvocation)
}
