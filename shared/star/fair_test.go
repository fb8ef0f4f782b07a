package star

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// fairBatch is a pooled batch of size bytes of tenant on st, admitted at
// at (only what the pool reads).
func fairBatch(st *stream, tenant string, size int, at int) *batch {
	return &batch{st: st, tenant: tenant, size: size, at: time.Unix(0, int64(at))}
}

// floodThenOne pools 64 batches of 16 KiB (1 MiB) of tenant "flood" on its
// own stream, then one of tenant "quiet" on another, and cuts 256 KiB
// flights until the pool is empty; it returns the flight that carried the
// quiet batch (0: the first).
func floodThenOne(t *testing.T, fifo bool) int {
	t.Helper()
	p := newPool(fifo)
	flood, quiet := &stream{id: sid(0)}, &stream{id: sid(1)}
	for i := 0; i < 64; i++ {
		p.push(fairBatch(flood, "flood", 16<<10, i))
	}
	p.push(fairBatch(quiet, "quiet", 100, 64))
	for f := 0; p.n > 0; f++ {
		out, bytes := p.cut(256<<10, nil)
		if len(out) == 0 || bytes > 256<<10 {
			t.Fatalf("flight %d: %d batches, %d bytes", f, len(out), bytes)
		}
		for _, b := range out {
			if b.st == quiet {
				return f
			}
		}
	}
	t.Fatal("the quiet batch was never cut")
	return -1
}

// TestPoolCutsAQuietTenantFirst: a batch pooled behind a tenant's flood
// rides the next flight, not the one after the flood's megabyte; with
// TenantFIFO (no fairness) it waits for all of it (four flights).
func TestPoolCutsAQuietTenantFirst(t *testing.T) {
	if f := floodThenOne(t, false); f != 0 {
		t.Fatalf("fair pool: the quiet tenant's batch rode flight %d behind the flood, want the first", f)
	}
	if f := floodThenOne(t, true); f != 4 {
		t.Fatalf("FIFO pool: the quiet tenant's batch rode flight %d, want 4 (behind 1 MiB of flood in 256 KiB flights)", f)
	}
}

// TestPoolShareWhileOthersWait: a tenant alone fills the budget but for
// the newcomers' reserve (work-conserving); a newcomer enters at once into
// the reserve; while another tenant waits for room, a tenant is held to
// budget/active, and the room a cut frees goes to the waiting tenant.
func TestPoolShareWhileOthersWait(t *testing.T) {
	const budget = 1000 // reserve 1000/8 = 125
	p := newPool(false)
	a, b, c := &stream{id: sid(0)}, &stream{id: sid(1)}, &stream{id: sid(2)}
	for i := 0; i < 8; i++ {
		if !p.fits("A", 100, budget) {
			t.Fatalf("alone, A was refused at %d bytes of a %d budget", p.bytes, budget)
		}
		p.push(fairBatch(a, "A", 100, i))
	}
	if p.fits("A", 100, budget) {
		t.Fatalf("A took the newcomers' reserve: %d bytes + 100 of %d", p.bytes, budget)
	}
	if !p.fits("B", 100, budget) {
		t.Fatal("a newcomer was refused the reserve")
	}
	p.push(fairBatch(b, "B", 100, 8))
	if p.fits("C", 200, budget) || p.fits("B", 100, budget) {
		t.Fatal("a full pool admitted a batch")
	}
	p.wait("C")
	p.cut(300, nil) // A's first three batches leave: 600 bytes pooled
	if p.fits("A", 100, budget) {
		t.Fatalf("A holds %d of %d bytes, over its third while C waits, and was admitted", p.tenants["A"].held, budget)
	}
	if !p.fits("C", 200, budget) {
		t.Fatal("C, holding nothing, was refused with room in the pool")
	}
	p.unwait("C")
	p.push(fairBatch(c, "C", 200, 9))
	if !p.fits("A", 25, budget) {
		t.Fatal("nobody waits, the pool has room below the reserve, and A was refused (not work-conserving)")
	}
	// Without fairness, A takes the room C waits for, and the reserve.
	q := newPool(true)
	for i := 0; i < 9; i++ {
		q.push(fairBatch(a, "A", 100, i))
	}
	q.wait("C")
	if !q.fits("A", 100, budget) {
		t.Fatal("FIFO pool refused A with room")
	}
}

// TestPoolKeepsStreamOrder is a property test against a naive model: any
// interleaving of tenants appending to shared streams, cut into flights of
// any size, is cut in each stream's admission (seq) order, conserves every
// batch and byte, and respects the flight target (but for a first batch
// larger than it); the accounting returns to zero.
func TestPoolKeepsStreamOrder(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			p := newPool(r.IntN(4) == 0)
			sts := make([]*stream, 1+r.IntN(5))
			for i := range sts {
				sts[i] = &stream{id: sid(i)}
			}
			want := map[*stream][]*batch{}
			got := map[*stream][]*batch{}
			pushed, cutN, bytes := 0, 0, 0
			cut := func() {
				target := 1 + r.IntN(200<<10)
				out, n := p.cut(target, nil)
				if len(out) > 1 && n > target {
					t.Fatalf("flight of %d bytes over its target %d", n, target)
				}
				sum := 0
				for _, b := range out {
					got[b.st] = append(got[b.st], b)
					sum += b.size
				}
				if sum != n {
					t.Fatalf("cut reports %d bytes, carries %d", n, sum)
				}
				cutN += len(out)
				bytes -= n
			}
			for i := 0; i < 300; i++ {
				if r.IntN(3) == 0 {
					cut()
					continue
				}
				st := sts[r.IntN(len(sts))]
				b := fairBatch(st, fmt.Sprint(r.IntN(4)), 1+r.IntN(100<<10), i)
				p.push(b)
				want[st] = append(want[st], b)
				pushed++
				bytes += b.size
				if p.bytes != bytes || p.n != pushed-cutN {
					t.Fatalf("pool counts %d bytes %d batches, model %d and %d", p.bytes, p.n, bytes, pushed-cutN)
				}
			}
			for p.n > 0 {
				cut()
			}
			if cutN != pushed || bytes != 0 || len(p.tenants) != 0 || len(p.ring) != 0 {
				t.Fatalf("cut %d of %d batches, %d bytes left, %d tenants and %d queues still accounted", cutN, pushed, bytes, len(p.tenants), len(p.ring))
			}
			for st, w := range want {
				g := got[st]
				for i := range w {
					if g[i] != w[i] {
						t.Fatalf("stream %s: batch %d cut out of admission order", st.id, i)
					}
				}
			}
		})
	}
}

// TestTenantFairnessInVirtualTime runs BenchmarkTenantFairness's scenarios
// in a synctest bubble: time is virtual, so the latencies are the PUT
// model's and the star's queueing alone, whatever else loads the machine.
// A flooding tenant leaves the quiet tenant's ack p99 within twice its solo
// p99; without fairness (TenantFIFO) it does not.
func TestTenantFairnessInVirtualTime(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of CPU")
	}
	var solo, fair, fifo fairnessResult
	for _, sc := range []struct {
		r           *fairnessResult
		flood, fifo bool
	}{{&solo, false, false}, {&fair, true, false}, {&fifo, true, true}} {
		synctest.Test(t, func(t *testing.T) {
			*sc.r = runFairness(t, sc.flood, sc.fifo, 200*time.Millisecond, 2*time.Second)
		})
	}
	t.Logf("quiet tenant ack p50/p99 (virtual ms): solo %.1f/%.1f, flood %.1f/%.1f (flood %.0f MB/s), flood without fairness %.1f/%.1f (flood %.0f MB/s)",
		solo.p50, solo.p99, fair.p50, fair.p99, fair.floodMBps, fifo.p50, fifo.p99, fifo.floodMBps)
	if fair.floodMBps < 50 || fifo.floodMBps < 50 {
		t.Fatalf("the flood did not load the star: %.0f and %.0f MB/s", fair.floodMBps, fifo.floodMBps)
	}
	if fair.p99 > 2*solo.p99 {
		t.Fatalf("with fairness, the flood took the quiet tenant's p99 from %.1f ms to %.1f ms: over twice", solo.p99, fair.p99)
	}
	if fifo.p99 <= 2*solo.p99 {
		t.Fatalf("without fairness the quiet tenant's p99 went from %.1f ms to only %.1f ms: the scenario does not flood", solo.p99, fifo.p99)
	}
}
