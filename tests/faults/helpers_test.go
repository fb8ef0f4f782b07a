package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/sim"
)

// row runs one fault-matrix row in a synctest bubble (virtual time) on a
// fresh simulated world, and logs its figures for docs/reliability.md.
func row(t *testing.T, name string, opt sim.Options, fn func(t *testing.T, w *sim.World, b *book)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		w, err := sim.NewWorld(1, opt)
		if err != nil {
			t.Fatal(err)
		}
		b := &book{acked: map[int]map[uint64]string{}}
		fn(t, w, b)
		t.Logf("ROW %s: faults_injected=%d records_acked=%d records_lost=0", name, w.Faults()+b.extra.Load(), b.count())
	})
}

// book is the acknowledged records, per stream index, by seq.
type book struct {
	mu    sync.Mutex
	acked map[int]map[uint64]string
	n     int
	loads atomic.Int64
	extra atomic.Int64 // faults injected by test wrappers, not the stores' injectors
}

func (b *book) add(stream int, a star.Ack, bodies []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acked[stream] == nil {
		b.acked[stream] = map[uint64]string{}
	}
	if a.LastSeq-a.FirstSeq+1 != uint64(len(bodies)) {
		return fmt.Errorf("ack %+v for %d records", a, len(bodies))
	}
	for i, bd := range bodies {
		seq := a.FirstSeq + uint64(i)
		if old, dup := b.acked[stream][seq]; dup {
			return fmt.Errorf("stream %d seq %d acked twice: %q and %q", stream, seq, old, bd)
		}
		b.acked[stream][seq] = bd
		b.n++
	}
	return nil
}

func (b *book) count() int { b.mu.Lock(); defer b.mu.Unlock(); return b.n }

// appendOne appends one batch of n records to stream si and books its ack.
func appendOne(ctx context.Context, n *sim.Node, w *sim.World, b *book, si int, tag string, recs int) (star.Ack, error) {
	var rs []format.Record
	var bodies []string
	for k := range recs {
		bd := fmt.Sprintf("%s.%d", tag, k)
		bodies = append(bodies, bd)
		rs = append(rs, format.Record{Body: []byte(bd)})
	}
	a, err := n.Star.Append(ctx, w.IDs[si], rs, star.AppendOptions{})
	if err != nil {
		return a, err
	}
	return a, b.add(si, a, bodies)
}

// load runs producers appending batches until each has made `each`; any
// append error fails the test (producers must see latency, never errors).
func load(t *testing.T, n *sim.Node, w *sim.World, b *book, producers, each int, gap time.Duration) {
	t.Helper()
	run := b.loads.Add(1)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				_, err := appendOne(ctx, n, w, b, p%len(w.IDs), fmt.Sprintf("L%d-p%d-%d", run, p, i), 1+i%3)
				cancel()
				if err != nil {
					t.Errorf("producer %d batch %d: %v", p, i, err)
					return
				}
				if gap > 0 {
					time.Sleep(gap)
				}
			}
		}()
	}
	wg.Wait()
}

// verify reads every stream from seq 0 through the reader over the
// unfaulted stores: every acked record at its seq, seqs contiguous, no
// record twice.
func verify(t *testing.T, w *sim.World, n *sim.Node, b *book) {
	t.Helper()
	r := w.Reader(n.Star, true)
	for si, st := range w.Streams {
		recs, tail, err := sim.ReadAll(context.Background(), r, st)
		if err != nil {
			t.Fatalf("read %s: %v", st.Name, err)
		}
		if uint64(len(recs)) != tail {
			t.Fatalf("%s: %d records, tail %d", st.Name, len(recs), tail)
		}
		seen := map[string]bool{}
		for i, rec := range recs {
			if rec.Seq != uint64(i) || seen[string(rec.Body)] {
				t.Fatalf("%s: seq %d at %d, body %q seen before: %v", st.Name, rec.Seq, i, rec.Body, seen[string(rec.Body)])
			}
			seen[string(rec.Body)] = true
		}
		b.mu.Lock()
		for seq, bd := range b.acked[si] {
			if seq >= uint64(len(recs)) || string(recs[seq].Body) != bd {
				b.mu.Unlock()
				t.Fatalf("%s: acked seq %d (%q) not readable at its seq (%d records)", st.Name, seq, bd, len(recs))
			}
		}
		b.mu.Unlock()
	}
}

// verifyFaulted reads every stream through the faults and checks each
// record served against the book: a read may fail, never serve wrong data.
func verifyFaulted(t *testing.T, w *sim.World, n *sim.Node, b *book) int {
	t.Helper()
	r := w.Reader(n.Star, false)
	served := 0
	for si, st := range w.Streams {
		recs, _, err := sim.ReadAll(context.Background(), r, st)
		if err != nil {
			t.Fatalf("read %s through the faults: %v", st.Name, err)
		}
		b.mu.Lock()
		for _, rec := range recs {
			if want, ok := b.acked[si][rec.Seq]; ok && want != string(rec.Body) {
				b.mu.Unlock()
				t.Fatalf("%s seq %d: served %q, acked %q", st.Name, rec.Seq, rec.Body, want)
			}
			served++
		}
		b.mu.Unlock()
	}
	return served
}

func start(t *testing.T, w *sim.World, gen int) *sim.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := w.StartNode(ctx, gen, time.Second)
	if err != nil {
		t.Fatalf("start star incarnation %d: %v", gen, err)
	}
	t.Cleanup(n.Kill)
	return n
}

// metric reads one series of the star's registry.
func metric(n *sim.Node, series string) float64 {
	var sb strings.Builder
	n.Star.Metrics().Write(&sb)
	for _, line := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(line, series+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

const (
	haltsSeries   = `strand_epoch_halts_total{class="express"}`
	backlogSeries = `strand_backlog_flights{class="express"}`
)

func stallSeries(cause string) string {
	return `strand_backlog_stalls_total{class="express",cause="` + cause + `"}`
}

func head(t *testing.T, w *sim.World) metastore.Head {
	t.Helper()
	h, err := w.Meta.GetHead(context.Background(), sim.Chain)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func absorbAll(t *testing.T, w *sim.World, n *sim.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.Absorber().AbsorbTo(ctx, sim.Chain, n.Star.Released(sim.Chain)); err != nil {
		t.Fatalf("absorb to the released head: %v", err)
	}
}

func synctestWait() { synctest.Wait() }
