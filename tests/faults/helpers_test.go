package faults

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/promtest"
	"github.com/strandlog/strand/tests/sim"
)

// rows sums every row's record counts, failed rows included, for the
// package's summary line (TestMain).
var rows = sim.Totals{Kind: "rows"}

// TestMain prints the matrix's summary after every row ran.
func TestMain(m *testing.M) {
	code := m.Run()
	fmt.Printf("SUMMARY faults: %s\n", &rows)
	os.Exit(code)
}

// row runs one fault-matrix row in a synctest bubble (virtual time) on a
// fresh simulated world, and logs its figures for docs/reliability.md: the
// record counts are the last verify's (the book against what was read
// back), also when the row fails.
func row(t *testing.T, name string, opt sim.Options, fn func(t *testing.T, w *sim.World, b *book)) {
	t.Helper()
	b := &book{acked: map[int]map[uint64]string{}}
	var faults int64
	defer func() {
		// Deferred: a failing row stops this goroutine too.
		tl := b.counted()
		rows.Add(t.Name(), tl, t.Failed())
		t.Logf("ROW %s: failed=%v faults_injected=%d verified=%v %s", name, t.Failed(), faults, b.verified.Load(), tl)
	}()
	synctest.Test(t, func(t *testing.T) {
		w, err := sim.NewWorld(1, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { faults = w.Faults() + b.extra.Load() }()
		fn(t, w, b)
	})
}

// book is the acknowledged records, per stream index, by seq.
type book struct {
	mu    sync.Mutex
	acked map[int]map[uint64]string
	n     int
	loads atomic.Int64
	extra atomic.Int64 // faults injected by test wrappers, not the stores' injectors
	// tally is the last verify's count of acked records read back;
	// verified says whether a verify ran at all.
	tally    sim.Tally
	verified atomic.Bool
}

// counted returns the last verify's counts (acked: the whole book when no
// verify ran, none of it read back).
func (b *book) counted() sim.Tally {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.verified.Load() {
		return sim.Tally{Acked: int64(b.n), Lost: int64(b.n)}
	}
	return b.tally
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

// verify checks that every slot below the star's released head holds W
// valid copies in the raw buckets, then reads every stream from seq 0 as a
// successor would (refs, and flights from valid raw copies up to the
// released head; never the star's memory): every acked record at its seq,
// seqs contiguous, no record twice.
func verify(t *testing.T, w *sim.World, n *sim.Node, b *book) {
	t.Helper()
	ctx := context.Background()
	d := sim.NewDurability(w)
	rel, h := n.Star.Released(sim.Chain), head(t, w)
	if err := d.Durable(ctx, rel, h.Settled); err != nil {
		t.Fatal(err)
	}
	succ, err := d.Successor(ctx, h, rel)
	if err != nil {
		t.Fatalf("rebuild what a successor reads: %v", err)
	}
	r := w.Reader(succ, true)
	all := make([][]star.SeqRecord, len(w.Streams))
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		var tl sim.Tally
		for si, recs := range all {
			tl.Add(sim.CountRecords(b.acked[si], recs))
		}
		b.tally = tl
		b.verified.Store(true)
	}()
	for si, st := range w.Streams {
		recs, tail, err := sim.ReadAll(ctx, r, st)
		if err != nil {
			t.Fatalf("read %s: %v", st.Name, err)
		}
		if uint64(len(recs)) != tail {
			t.Fatalf("%s: %d records, tail %d", st.Name, len(recs), tail)
		}
		all[si] = recs
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

// metric reads one series of the star's registry; a series the star does
// not export fails the test (it never reads as 0).
func metric(t *testing.T, n *sim.Node, series string) float64 {
	t.Helper()
	return promtest.Value(t, n.Star.Metrics(), series)
}

const (
	haltsSeries   = `strand_epoch_halts_total{class="express"}`
	backlogSeries = `strand_backlog_flights{class="express"}`
)

func stallSeries(cause string) string {
	// Labels in name order, as the Prometheus client library writes them.
	return `strand_backlog_stalls_total{cause="` + cause + `",class="express"}`
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
