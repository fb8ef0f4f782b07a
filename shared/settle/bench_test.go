package settle_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/dir"
	"github.com/strandlog/strand/shared/settle"
)

// BenchmarkSettleStandardBacklog settles one stream's backlog on Standard
// (8 MiB flights of 16 KiB records, one absorb pass: one ref over every
// flight) from and to local directory buckets, and reports the heap's
// peak above what it held before the step (sampled every millisecond), the
// objects written and the largest one. Issue 19's finding 2: the peak is
// bounded by MaxObjectBytes, not by the ref. Run it with
//
//	go test ./shared/settle -run '^$' -bench SettleStandardBacklog -benchtime 1x
func BenchmarkSettleStandardBacklog(b *testing.B) {
	for _, mib := range []int{256, 1024} {
		b.Run(fmt.Sprintf("backlog=%dMiB", mib), func(b *testing.B) {
			for range b.N {
				benchSettle(b, mib)
			}
		})
	}
}

func benchSettle(b *testing.B, mib int) {
	b.StopTimer()
	ctx := context.Background()
	root := b.TempDir()
	xb, err := dir.Open(root, "std-az1")
	if err != nil {
		b.Fatal(err)
	}
	settled, err := dir.Open(root, "settled")
	if err != nil {
		b.Fatal(err)
	}
	c := metastore.ChainID{Star: "star-0", Class: metastore.Standard}
	set := chain.Set{Star: c.Star, W: 1, Buckets: []objstore.Bucket{xb}}
	meta := metastore.NewMem()
	st, err := absorbtest.NewStar(ctx, meta, c, set) // mints epoch 1
	if err != nil {
		b.Fatal(err)
	}
	id := absorbtest.StreamIDs(1)[0]
	const flight, rec = 8 << 20, 16 << 10
	var enc []byte
	n := 0
	for len(enc)+rec <= flight-1024 {
		enc = format.AppendRecord(enc, format.Record{TimestampMs: 1_700_000_000_000, Body: make([]byte, rec-20)})
		n++
	}
	bld := format.NewBuilder()
	seq := uint64(0)
	for written := 0; written < mib<<20; written += len(enc) {
		bld.Reset(st.Epoch, st.Slot, format.Nonce{byte(st.Epoch)})
		bld.BeginSegment(id, seq)
		bld.AddRecords(enc, n, 1_700_000_000_000, 1_700_000_000_000)
		bld.EndSegment()
		if err := xb.PutIfAbsent(ctx, format.SlotKey(c.Star, st.Epoch, st.Slot), bld.Finish()); err != nil {
			b.Fatal(err)
		}
		st.Slot++
		seq += uint64(n)
	}
	a := &absorb.Absorber{Meta: meta, Sets: absorb.Sets{Standard: set}, MaxSlotsPerPass: 512}
	if _, err := a.Run(ctx, c, st.Released()); err != nil {
		b.Fatal(err)
	}
	refs, err := meta.QueryRefs(ctx, id.String(), 0, 10)
	if err != nil || len(refs) != 1 {
		b.Fatalf("want the backlog in one ref, got %d (%v)", len(refs), err)
	}
	s := &settle.Settler{Meta: meta, Sets: absorb.Sets{Standard: set}, Settled: settled}

	runtime.GC()
	base := settle.HeapObjects()
	stop := settle.PeakOf()
	b.StartTimer()
	res, err := s.Step(ctx, c)
	b.StopTimer()
	peak := stop()
	if err != nil {
		b.Fatal(err)
	}
	refs, err = meta.QueryRefs(ctx, id.String(), 0, 10)
	if err != nil || len(refs) != 1 || refs[0].LastSeq+1 != seq {
		b.Fatalf("after settle: %d refs (%v)", len(refs), err)
	}
	var largest int64
	for _, l := range refs[0].Locations {
		if !l.Settled {
			b.Fatalf("location %s not settled", l.Key)
		}
		largest = max(largest, l.Length)
	}
	b.ReportMetric(float64(peak-min(base, peak))/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(res.Objects), "objects")
	b.ReportMetric(float64(largest)/(1<<20), "largest-object-MiB")
	b.SetBytes(int64(mib) << 20)
}
