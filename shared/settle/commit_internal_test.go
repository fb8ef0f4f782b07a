package settle

import (
	"context"
	"errors"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// TestMergeResumesAfterConfigChange (issue 30, suspected in mergeresume.go):
// a merge cut short after two of its packs (a timeout) resumes in an
// invocation with another MaxObjectBytes (a deploy between them). It
// completes, and every packed entry of the merged run reads back from its
// pack: the stream, seqs and CRC the run says. Before merged pack keys
// carried the merge's digest, the resumed merge adopted the stored packs,
// laid out for the old size, and failed with ErrForeign on every
// invocation (failed on main 3b5e022).
func TestMergeResumesAfterConfigChange(t *testing.T) {
	defer SetMergeChunk(300)()
	const streams, runs, slots = 300, 4, 64
	recBytes := func(i, r int) int { return 10 + (i*31+r*17)%90 }
	ctx := t.Context()
	bucket := objstore.NewMem("settled")
	c, meta, _ := mergeFixture(t, bucket, streams, runs, slots, 3, recBytes, nil, nil)
	db := &deadlineBucket{Bucket: bucket}
	db.puts.Store(2)
	cut := &Settler{Meta: meta, Settled: db, PassIndex: true, Fanout: runs, MaxObjectBytes: 1500}
	if ok, err := cut.merge(ctx, c, &Result{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the merge cut short: %t, %v", ok, err)
	}
	after := &Settler{Meta: meta, Settled: bucket, PassIndex: true, Fanout: runs, MaxObjectBytes: 4000}
	if ok, err := after.merge(ctx, c, &Result{}); err != nil || !ok {
		t.Fatalf("the merge after the deploy: %t, %v", ok, err)
	}
	checkMergedPacks(t, bucket, c, metastore.Cursor{Epoch: 1})
}

// checkMergedPacks reads every packed entry of the merged run at `at`
// from its pack and checks it against the run.
func checkMergedPacks(t *testing.T, b objstore.Bucket, c metastore.ChainID, at metastore.Cursor) {
	t.Helper()
	obj, err := b.Get(t.Context(), format.MergedRunKey(c.Star, c.Class.String(), at.Epoch, at.Slot), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := format.ParsePassIndex(obj)
	if err != nil {
		t.Fatal(err)
	}
	m.Merged = true
	n := 0
	for i := range m.Streams {
		e := &m.Streams[i]
		for _, g := range e.Segments {
			key := mergedPackKey(c, &m, g.Slot)
			seg, err := b.Get(t.Context(), key, int64(g.Offset), int64(g.Length))
			if err != nil {
				t.Fatalf("stream %s: %v", e.Stream, err)
			}
			info, _, err := format.ParseSegment(seg)
			if err != nil || info.Stream != e.Stream || info.FirstSeq != g.FirstSeq || info.Count != g.Count || crcOf(seg) != g.CRC {
				t.Fatalf("stream %s: %s at %d: %+v, %v: want seqs %d+%d", e.Stream, key, g.Offset, info, err, g.FirstSeq, g.Count)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("the merged run has no packed entry")
	}
}

// mergedPackKey is where merged run m's pack slot lives.
func mergedPackKey(c metastore.ChainID, m *format.PassIndex, slot uint64) string {
	return format.MergedPackKey(c.Star, c.Class.String(), m.Epoch, m.FirstSlot, m.EndSlot, m.Digest, slot)
}
