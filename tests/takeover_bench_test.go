package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/star"
)

// BenchmarkTakeover measures how long a new star takes to take over a
// chain whose predecessor died with `backlog` released but unabsorbed
// flights (nothing absorbed while it ran): fence, absorb up to the cut,
// mint. Every bucket call costs the given latency, so the figure shows how
// takeover scales with the backlog budget (--s3-chain-backlog-flights).
//
//	go test ./tests -run '^$' -bench Takeover -benchtime 1x
func BenchmarkTakeover(b *testing.B) {
	for _, lat := range []time.Duration{0, time.Millisecond} {
		for _, backlog := range []int{16, 64, 256} {
			b.Run(fmt.Sprintf("latency=%s/backlog=%d", lat, backlog), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					w := newWorld(3)
					n := w.startStar(b, false)
					ids := absorbtest.StreamIDs(4)
					w.open(b, n.s, ids)
					for i := 0; i < backlog; i++ { // one flight per sequential append
						if _, err := n.s.Append(context.Background(), ids[i%4], []format.Record{{Body: []byte("r")}}, star.AppendOptions{}); err != nil {
							b.Fatal(err)
						}
					}
					n.kill()
					for _, in := range w.inj {
						in.SetLatency(lat, lat)
					}
					b.StartTimer()
					start := time.Now()
					n2 := w.startStar(b, false)
					took := time.Since(start)
					b.StopTimer()
					head, _ := w.meta.GetHead(context.Background(), metastore.ChainID{Star: "star-0", Class: metastore.Express})
					if head.Checkpoint.Epoch != 1 || head.Checkpoint.Slot < uint64(backlog) {
						b.Fatalf("takeover left the checkpoint at %s with %d flights in the backlog", head.Checkpoint, backlog)
					}
					n2.kill()
					b.ReportMetric(float64(took.Milliseconds()), "ms/takeover")
					for _, in := range w.inj {
						in.SetLatency(0, 0)
					}
				}
			})
		}
	}
}
