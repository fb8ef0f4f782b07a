package dynamo

import (
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Invariant (fakes as strict as the service): the memory and bolt stores
// condition SwapRefs, SettleRef and DeleteRefs on metastore.EqualRef;
// DynamoDB on the item's Sum (refSum). For valid refs the two agree, so
// a swap the fakes refuse as stale DynamoDB refuses too, and the other
// way round: each field changed alone (own marks, carried table and its
// tail, command state included) changes both, and an unchanged copy
// matches both.
func TestReviewSumAgreesWithEqualRef(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 62))
	base := func() metastore.Ref {
		r := ref(sid(1), 10, 29)
		r.Producers = []metastore.ProducerMark{{Producer: [16]byte{1}, BatchSeq: 3, FirstSeq: 20, LastSeq: 24}}
		r.Carried = []metastore.ProducerMark{{Producer: [16]byte{2}, BatchSeq: 1, FirstSeq: 11, LastSeq: 12}}
		r.CarriedBelow = 20
		r.Commands = &format.StreamCommands{FenceToken: "t", TrimSeq: 5}
		return r
	}
	edits := map[string]func(r *metastore.Ref){
		"first ts":       func(r *metastore.Ref) { r.FirstTsMs++ },
		"bytes":          func(r *metastore.Ref) { r.Bytes++ },
		"location key":   func(r *metastore.Ref) { r.Locations[0].Key += "x" },
		"location off":   func(r *metastore.Ref) { r.Locations[0].Offset++ },
		"settled":        func(r *metastore.Ref) { r.Locations[0].Settled = !r.Locations[0].Settled },
		"mark batch":     func(r *metastore.Ref) { r.Producers[0].BatchSeq++ },
		"mark producer":  func(r *metastore.Ref) { r.Producers[0].Producer[15] = 9 },
		"no marks":       func(r *metastore.Ref) { r.Producers = nil },
		"carried batch":  func(r *metastore.Ref) { r.Carried[0].BatchSeq++ },
		"carried seqs":   func(r *metastore.Ref) { r.Carried[0].LastSeq = 13 },
		"carried tail":   func(r *metastore.Ref) { r.CarriedBelow++ },
		"no carried":     func(r *metastore.Ref) { r.Carried, r.CarriedBelow = nil, 0 },
		"fence token":    func(r *metastore.Ref) { r.Commands.FenceToken = "u" },
		"trim":           func(r *metastore.Ref) { r.Commands.TrimSeq++ },
		"config":         func(r *metastore.Ref) { r.Commands.HasConfig, r.Commands.Config.RetentionMs = true, 1 },
		"config no-op":   func(r *metastore.Ref) { r.Commands.HasConfig = true },
		"no commands":    func(r *metastore.Ref) { r.Commands = nil },
		"empty commands": func(r *metastore.Ref) { r.Commands = &format.StreamCommands{} },
	}
	names := make([]string, 0, len(edits))
	for n := range edits {
		names = append(names, n)
	}
	checked := 0
	for range 2000 {
		a, b := base(), base()
		var applied []string
		for range 1 + rng.IntN(3) {
			n := names[rng.IntN(len(names))]
			if len(b.Producers) == 0 || len(b.Carried) == 0 || b.Commands == nil {
				break // the edits that clear a field come last
			}
			applied = append(applied, n)
			edits[n](&b)
		}
		if metastore.ValidateRef(b) != nil {
			continue
		}
		checked++
		if eq, sum := metastore.EqualRef(a, b), refSum(a) == refSum(b); eq != sum {
			t.Fatalf("edits %v: EqualRef %t, Sum equal %t", applied, eq, sum)
		}
		if c := b; !metastore.EqualRef(b, c) || refSum(b) != refSum(c) {
			t.Fatalf("edits %v: a ref does not match its copy", applied)
		}
	}
	if checked < 500 {
		t.Fatalf("only %d valid edited refs checked", checked)
	}
}
