package dynamo

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// worstRef is a ref at every bound at once: locations up to MaxRefBytes,
// MaxRefProducerMarks own marks, a full carried table and command state
// with the longest fencing token and a configuration.
func worstRef(id string, first uint64) metastore.Ref {
	const n = metastore.MaxRefProducerMarks
	r := metastore.Ref{StreamID: id, FirstSeq: first, LastSeq: first + 2*n, FirstTsMs: -1 << 62, LastTsMs: 1 << 62, Bytes: 1 << 62}
	for i := 0; ; i++ {
		l := metastore.Location{Key: fmt.Sprintf("chains/star-1/%020d/%s", i, strings.Repeat("k", 900)), Offset: 1 << 60, Length: 1 << 60, FirstSeq: first + uint64(i)}
		if metastore.RefSize(r)+metastore.LocationSize(l) > metastore.MaxRefBytes {
			break
		}
		r.Locations = append(r.Locations, l)
	}
	for i := range uint64(n) {
		p := [16]byte{byte(i >> 8), byte(i), 0xff}
		r.Carried = append(r.Carried, metastore.ProducerMark{Producer: p, BatchSeq: 1 << 60, FirstSeq: first + i, LastSeq: first + i})
		r.Producers = append(r.Producers, metastore.ProducerMark{Producer: p, BatchSeq: 1<<60 + 1, FirstSeq: first + n + i, LastSeq: first + n + i})
	}
	r.CarriedBelow = first + n
	r.Commands = &format.StreamCommands{FenceToken: strings.Repeat("f", format.MaxFenceTokenBytes), TrimSeq: 1 << 63,
		HasConfig: true, Config: format.StreamConfig{RetentionMs: 1 << 62, TimestampMode: format.MaxTimestampMode, Uncapped: true}}
	return r
}

// Invariant (metastore doc: "RefSize is never below what DynamoDB counts"):
// the estimate the memory and bolt stores enforce bounds the item this
// package writes for a ref at every bound at once (own marks, carried
// table, command state and the write id: TestSizeEstimatesBoundItems
// draws locations only), and that item is under DynamoDB's 400 KB, so a worst-case ref
// the fakes accept is one DynamoDB accepts.
func TestReviewWorstRefFitsAnItem(t *testing.T) {
	r := worstRef(sid(1), 10)
	if err := metastore.ValidateRef(r); err != nil {
		t.Fatalf("the worst-case ref is not valid: %v", err)
	}
	if err := metastore.CheckRefSize(r); err != nil {
		t.Fatalf("the worst-case ref is over the ref bound: %v", err)
	}
	// The item as stored: a conditional transaction adds its write id
	// (markWrite), which a Query's 1 MB page counts too.
	stored := func(r metastore.Ref) int { return itemSize(refAttrs(r)) + len(attrWID) + 12 }
	got, est := stored(r), metastore.RefSize(r)
	if got > est {
		t.Errorf("DynamoDB counts %d bytes, over RefSize's %d", got, est)
	}
	if got > metastore.MaxItemBytes {
		t.Errorf("the worst-case ref item is %d bytes, over DynamoDB's %d", got, metastore.MaxItemBytes)
	}
	// Each optional attribute alone: a ref with just command state (the
	// encoding holds a configuration that commandsSize once left out).
	c := ref(sid(2), 0, 9)
	c.Commands = r.Commands
	if got, est := stored(c), metastore.RefSize(c); got > est {
		t.Errorf("ref with command state: DynamoDB counts %d bytes, over RefSize's %d", got, est)
	}
	// A transaction of refs at the bound: PutRefs' chunks stay under 4 MB
	// as DynamoDB counts them.
	refs := make([]metastore.Ref, 0, 40)
	for i := range 40 {
		refs = append(refs, worstRef(sid(3), uint64(i)*(2*metastore.MaxRefProducerMarks+1)))
	}
	for chunk := range metastore.RefChunks(refs) {
		total := 0
		for _, x := range chunk {
			total += stored(x)
		}
		if total > metastore.MaxTxBytes {
			t.Errorf("a PutRefs chunk of %d worst-case refs is %d bytes, over DynamoDB's %d", len(chunk), total, metastore.MaxTxBytes)
		}
	}
}

// Invariant (metastore doc: SettleRef takes 0 to the bound of old refs
// ValidateSettleRef accepts, "At most MaxSwapRefs+1 items"): every
// SettleRef the shared validator accepts fits one DynamoDB transaction
// (100 actions), so the memory store, which accepts it, is not kinder
// than DynamoDB. The most old refs the validator takes are settled here
// on the emulator.
func TestReviewSettleRefAtTheBoundFitsATransaction(t *testing.T) {
	settled := func(first uint64) metastore.Ref {
		r := ref(sid(1), first, first)
		r.Locations = []metastore.Location{{Settled: true, Key: fmt.Sprintf("streams/%s/%d", sid(1), first), Offset: 64, Length: 10, FirstSeq: first}}
		return r
	}
	n := metastore.MaxSwapRefs + 1
	var old []metastore.Ref
	for ; n > 0; n-- {
		old = old[:0]
		for i := range n {
			old = append(old, settled(uint64(i)))
		}
		repl := settled(0)
		repl.LastSeq = uint64(n - 1)
		if metastore.ValidateSettleRef(old, repl) == nil {
			break
		}
	}
	if n < 2 {
		t.Fatalf("ValidateSettleRef accepts at most %d old refs", n)
	}
	st := newStore(t)
	ctx := t.Context()
	c := metastore.ChainID{Star: "star-settle", Class: metastore.Express}
	at := func(slot uint64) metastore.Cursor { return metastore.Cursor{Epoch: 1, Slot: slot} }
	if err := st.MintEpoch(ctx, c, 0, epoch(1)); err != nil {
		t.Fatal(err)
	}
	if err := st.AdvanceCursor(ctx, c, metastore.Settled, at(0), at(40)); err != nil {
		t.Fatal(err)
	}
	for _, o := range old {
		if err := st.SettleRef(ctx, c, at(40), nil, o); err != nil {
			t.Fatalf("settle ref %d: %v", o.FirstSeq, err)
		}
	}
	repl := settled(0)
	repl.LastSeq = uint64(n - 1)
	err := st.SettleRef(ctx, c, at(40), old, repl)
	if errors.Is(err, metastore.ErrTooLarge) {
		t.Fatalf("SettleRef of %d old refs, which ValidateSettleRef accepts (and the memory store writes): %v", n, err)
	}
	if err != nil {
		t.Fatalf("SettleRef of %d old refs: %v", n, err)
	}
	got, err := st.QueryRefs(ctx, sid(1), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].LastSeq != repl.LastSeq {
		t.Fatalf("refs after the settle: %d, want the one replacement", len(got))
	}
}
