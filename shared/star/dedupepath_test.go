package star

import (
	"encoding/binary"
	"testing"

	"github.com/strandlog/strand/shared/format"
)

// BenchmarkDedupePath is the dedupe table's work per producer batch
// (check, admit, release) over 1,000 producers of one stream taking turns:
// under the star-wide bound, and past it (a bound of 500: every batch
// forgets the star's least recently used producer and remembers a new one).
// docs/performance/many-streams.md ("What else grows with streams") compares it with
// the table before the star-wide bound:
//
//	go test ./shared/star -run '^$' -bench DedupePath
func BenchmarkDedupePath(b *testing.B) {
	for _, c := range []struct {
		name  string
		bound int
	}{{"under-bound", DefaultStarMaxProducers}, {"past-bound", 500}} {
		b.Run(c.name, func(b *testing.B) {
			const producers = 1000
			d := newDedupe(DefaultDedupeWindow, DefaultProducerIdle, DefaultMaxProducers, newProducerLRU(c.bound))
			ids := make([]format.ProducerID, producers)
			for i := range ids {
				binary.BigEndian.PutUint64(ids[i][8:], uint64(i)+1)
			}
			var bt batch // released before the next: one will do
			b.ResetTimer()
			for i := range b.N {
				id := ids[i%producers]
				seq := uint64(i / producers)
				bt.producer, bt.batchSeq = id, seq
				if v := d.check(id, seq, 0); v.err != nil || v.dup != nil {
					b.Fatal(v)
				}
				d.admit(id, seq, &bt, 0)
				d.released(&bt, Ack{FirstSeq: seq, LastSeq: seq})
			}
		})
	}
}
