package settle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
)

// keptBodies is the settled bucket of TestSettleLendsItsBuffers: a memory
// bucket that keeps what a Keeper is given as the very slice (as
// objstore.Mem's KeepIfAbsent does) and records every body it was handed,
// lent (PutIfAbsent) or given (KeepIfAbsent), with a copy of its bytes
// when the put returned.
type keptBodies struct {
	*objstore.Mem
	mu    sync.Mutex
	puts  []handed
	lent  int
	addrs map[*byte]int // the lent bodies' first bytes: how often each was lent
}

type handed struct {
	key    string
	body   []byte // the caller's slice (kept, so no other allocation gets its address)
	copied []byte // its bytes when the put returned
	given  bool
}

var _ objstore.Keeper = (*keptBodies)(nil)

func (k *keptBodies) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	err := k.Mem.PutIfAbsent(ctx, key, body)
	k.record(key, body, false, err)
	return err
}

func (k *keptBodies) KeepIfAbsent(ctx context.Context, key string, body []byte) error {
	err := k.Mem.KeepIfAbsent(ctx, key, body)
	k.record(key, body, true, err)
	return err
}

func (k *keptBodies) record(key string, body []byte, given bool, err error) {
	if err != nil || len(body) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.puts = append(k.puts, handed{key: key, body: body, copied: bytes.Clone(body), given: given})
	if !given {
		k.lent++
		k.addrs[&body[0]]++
	}
}

// TestSettleLendsItsBuffers (issue 36, ADR 0072): settle renders its
// settled objects and packs in buffers it reuses (bufs.go), so it lends
// them to the bucket (PutIfAbsent, which keeps no reference once it
// returns) and never gives one to a Keeper, which would keep the very
// slice: every object stays byte for byte what was put, every given body
// is unchanged, and buffers were reused (fewer distinct lent buffers than
// lent puts). Before the pool every object was a new buffer given to the
// bucket (no lent put: this failed on main 8bd9c43); with the pool and
// the Keeper path the given bodies changed after their puts.
func TestSettleLendsItsBuffers(t *testing.T) {
	for _, pass := range []bool{false, true} {
		t.Run(fmt.Sprintf("pass-index=%v", pass), func(t *testing.T) {
			e := newEnv(t, 6, nil)
			e.s.MaxSlotsPerStep = 4
			e.s.MaxObjectBytes = 200 // several objects per ref
			if pass {
				e.withIndex() // packs, run indexes, merged runs and flushes
				e.s.Fanout = 2
			}
			e.flights(24)
			e.absorbAll()
			if pass {
				b := e.recordBytes()
				e.s.FlushBytes = 6 * b
				e.s.MaxObjectBytes = 2 * b
			}
			kb := &keptBodies{Mem: e.settled, addrs: map[*byte]int{}}
			e.s.Settled = kb
			for range 6 {
				if _, err := e.s.Step(t.Context(), chainX); err != nil {
					t.Fatal(err)
				}
			}
			if h := e.head(); h.Settled != cur(1, 24) {
				t.Fatalf("head %+v: want settled 1/24", h)
			}
			if pass {
				e.checkMixed()
			} else {
				e.checkSettled()
				e.check()
			}
			var objs int
			for _, p := range kb.puts {
				if p.given && !bytes.Equal(p.body, p.copied) {
					t.Fatalf("%s: a given body changed after its put", p.key)
				}
				got, err := e.settled.Get(t.Context(), p.key, 0, -1)
				if errors.Is(err, objstore.ErrNotFound) {
					continue // merged away since
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, p.copied) {
					t.Fatalf("%s: the stored object changed after its put (%d bytes, put %d)", p.key, len(got), len(p.copied))
				}
				objs++
			}
			if kb.lent == 0 || len(kb.addrs) >= kb.lent {
				t.Fatalf("%d lent puts in %d distinct buffers (%d puts): want buffers reused", kb.lent, len(kb.addrs), len(kb.puts))
			}
			if objs == 0 {
				t.Fatal("no object left to check")
			}
			t.Logf("%d puts, %d lent in %d buffers, %d objects checked", len(kb.puts), kb.lent, len(kb.addrs), objs)
		})
	}
}
