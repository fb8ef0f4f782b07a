package star

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// BenchmarkTenantFairness measures a quiet tenant's ack latency on an
// Express star (K=3, W=2, PUTs p50 5 ms p99 15 ms per bucket) whose upload
// window (4 slots of 256 KiB flights, an 8 MiB pool) is the bottleneck:
//
//   - solo: the quiet tenant alone, 100 batches/s of one 1 KiB record,
//     latency from each batch's scheduled send (admission waits count);
//   - flood: the same, while a flooding tenant's 8 producers submit
//     64 KiB batches as fast as admission lets them (256 outstanding
//     each), keeping the pool and the window full;
//   - flood-fifo: the flood with Config.TenantFIFO (no fairness).
//
// It reports the quiet tenant's p50 and p99 (ms) and the flood's MB/s.
// docs/performance/ingest.md ("Tenant fairness") gives a run:
//
//	go test -run '^$' -bench TenantFairness -benchtime 1x ./shared/star
func BenchmarkTenantFairness(b *testing.B) {
	for _, sc := range []struct {
		name        string
		flood, fifo bool
	}{{"solo", false, false}, {"flood", true, false}, {"flood-fifo", true, true}} {
		b.Run(sc.name, func(b *testing.B) {
			for b.Loop() {
				r := runFairness(b, sc.flood, sc.fifo, 500*time.Millisecond, 3*time.Second)
				b.ReportMetric(r.p50, "quiet-p50-ms")
				b.ReportMetric(r.p99, "quiet-p99-ms")
				b.ReportMetric(r.floodMBps, "flood-MB/s")
			}
		})
	}
}

type fairnessResult struct {
	p50, p99, floodMBps float64
	quiet               int
}

// chainless stores chain slots without their bodies (the benchmark never
// reads them back), so a flood does not fill memory.
type chainless struct{ objstore.Bucket }

func (c chainless) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if strings.HasPrefix(key, "chains/") {
		body = nil
	}
	return c.Bucket.PutIfAbsent(ctx, key, body)
}

func runFairness(tb testing.TB, flood, fifo bool, warmup, measure time.Duration) fairnessResult {
	tb.Helper()
	cfg := Defaults()
	cfg.Standard = ClassConfig{}
	cfg.Express = ClassConfig{W: 2, MemoryBufferMiB: 8, ParallelUploads: 4, FlushDeadline: 4 * time.Millisecond,
		IdleCut: true, FlightKiB: 256, CommitDeadline: 10 * time.Second}
	for i := 0; i < 3; i++ {
		inj := objstore.NewInjector(int64(i + 1))
		if err := inj.SetLatency(5*time.Millisecond, 15*time.Millisecond, objstore.OpPut); err != nil {
			tb.Fatal(err)
		}
		cfg.Express.Buckets = append(cfg.Express.Buckets, objstore.WithFaults(chainless{objstore.NewMem("b" + itoa(i))}, inj))
	}
	cfg.BacklogFlights = 1 << 20
	cfg.TenantFIFO = fifo
	cfg.Rand = seededReader{rand.New(rand.NewPCG(1, 2))}
	s, err := New(cfg, metastore.NewMem(), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	const floodProducers = 8
	for i := 0; i <= floodProducers; i++ {
		if err := s.Open(StreamInfo{ID: sid(i), Class: metastore.Express}); err != nil {
			tb.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// Stand in for the absorb: the backlog never stalls.
	chain := metastore.ChainID{Star: s.ID(), Class: metastore.Express}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			s.Absorbed(chain, s.Released(chain))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+measure)
	var mu sync.Mutex
	var floodBytes int
	if flood {
		big := recs(64, func(int) []byte { return make([]byte, 1024-14) })
		size, _ := format.ValidateBatch(big)
		for i := 1; i <= floodProducers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make(chan *Pending, 256)
				defer close(out)
				go func() {
					for p := range out {
						if _, err := p.Wait(ctx); err == nil {
							if now := time.Now(); now.After(from) && now.Before(until) {
								mu.Lock()
								floodBytes += size
								mu.Unlock()
							}
						}
					}
				}()
				for ctx.Err() == nil {
					p, err := s.Submit(ctx, sid(i), big, AppendOptions{Tenant: "flood"})
					if err != nil {
						return
					}
					out <- p
				}
			}()
		}
	}
	// The quiet tenant: 100 batches/s on a schedule, one goroutine each.
	var lat []time.Duration
	one := recs(1, func(int) []byte { return make([]byte, 1024-14) })
	var qwg sync.WaitGroup
	for at := start; at.Before(until); at = at.Add(10 * time.Millisecond) {
		time.Sleep(time.Until(at))
		qwg.Add(1)
		go func() {
			defer qwg.Done()
			if _, err := s.Append(ctx, sid(0), one, AppendOptions{Tenant: "quiet"}); err != nil {
				tb.Error(err)
				return
			}
			if at.After(from) {
				d := time.Since(at)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	qwg.Wait()
	cancel()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	if len(lat) == 0 {
		tb.Fatal("no quiet batch measured")
	}
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))]) / 1e6 }
	return fairnessResult{p50: q(0.5), p99: q(0.99), floodMBps: float64(floodBytes) / 1e6 / measure.Seconds(), quiet: len(lat)}
}
