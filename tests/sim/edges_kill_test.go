package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/shared/objstore"
)

// Kills at a write in TestSimEdges: besides the kills between steps, the
// star is killed in the middle of one of its own writes or its absorb's
// (every external write is a place a process may die): a slot copy's put
// (a flight's, or a fencer's poison in an in-process recovery), the
// absorb's pass index put, the absorb's metastore write (the lease, refs,
// the checkpoint's move) or the star's (an epoch's mint or cut). The
// struck write waits until the kill ends its context, and then lands or
// not (seeded), as a process dying with a request on the wire; a new
// incarnation then takes over from what is there.

// Where a kill at a write strikes.
const (
	killNone       = iota
	killSlot       // a slot copy's put
	killPass       // the absorb's pass index put
	killAbsorbMeta // the absorb's metastore write
	killStarMeta   // the star's metastore write
	killKinds
)

var killNames = [killKinds]string{"none", "slot put", "pass index put", "absorb metastore write", "star metastore write"}

var edgeKills [killKinds]atomic.Int64

// killer arms a kill at the next write of one kind and carries it out.
type killer struct {
	armed   atomic.Int32 // the kind armed (killNone: none)
	running atomic.Bool  // a node serves, started: its writes' contexts end at its kill
	req     chan string  // what a kill struck (buffered: one at a time)

	mu  sync.Mutex
	rng *rand.Rand // whether a struck write lands
}

func newKiller(seed int64) *killer {
	return &killer{req: make(chan string, 1), rng: rand.New(rand.NewPCG(uint64(seed), 0x4b11))}
}

// strike reports whether a write of kind is the one the armed kill
// strikes (once per arming), and asks for the kill.
func (k *killer) strike(kind int, what string) bool {
	if !k.running.Load() || !k.armed.CompareAndSwap(int32(kind), killNone) {
		return false
	}
	edgeKills[kind].Add(1)
	select {
	case k.req <- killNames[kind] + ": " + what:
	default:
	}
	return true
}

// die is a struck write: it waits for the kill (its context ends), then
// lands or not, and fails.
func (k *killer) die(ctx context.Context, write func(context.Context) error) error {
	<-ctx.Done()
	k.mu.Lock()
	land := k.rng.IntN(2) == 0
	k.mu.Unlock()
	if land {
		_ = write(context.WithoutCancel(ctx))
	}
	return fmt.Errorf("sim: killed during this write (landed: %v): %w", land, ctx.Err())
}

// killBucket strikes kind at the bucket's puts.
type killBucket struct {
	objstore.Bucket
	k    *killer
	kind int
}

func (b *killBucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if b.k.strike(b.kind, key) {
		return b.k.die(ctx, func(ctx context.Context) error { return b.Bucket.PutIfAbsent(ctx, key, body) })
	}
	return b.Bucket.PutIfAbsent(ctx, key, body)
}

// metaWrites are the MetaFaults ops that write.
var metaWrites = map[string]bool{"AdvanceCursor": true, "BeginAbsorb": true, "MintEpoch": true, "MoveCursors": true, "PutRefs": true,
	"UpdateEpoch": true, "SettleRef": true, "SwapRefs": true, "DeleteRefs": true, "RaiseFloor": true}

// install wraps w's chain buckets and the absorb's index bucket, and
// blocks the star's and the absorb's metastore writes when struck (a
// blocked call returns once the kill ends its context, not written).
// Before any node starts.
func (k *killer) install(e *edges) {
	e.w.WrapBuckets(func(_ int, b objstore.Bucket) objstore.Bucket { return &killBucket{Bucket: b, k: k, kind: killSlot} })
	e.w.WrapAbsorbIndex = func(b objstore.Bucket) objstore.Bucket { return &killBucket{Bucket: b, k: k, kind: killPass} }
	e.w.SettleMeta.BlockWhen(func(op string) bool { return metaWrites[op] && k.strike(killAbsorbMeta, op) })
	e.w.StarMeta.BlockWhen(func(op string) bool { return metaWrites[op] && k.strike(killStarMeta, op) })
}

// run carries out the kills the strikes ask for, and restarts the star
// (a start that fails is retried by the steps).
func (k *killer) run(ctx context.Context, e *edges) {
	for {
		select {
		case <-ctx.Done():
			return
		case what := <-k.req:
			e.life <- struct{}{}
			if e.kill() {
				edgeTotals.restarts.Add(1)
				e.mu.Lock()
				e.killedAt = what
				e.mu.Unlock()
			}
			if err := e.restart(ctx); err != nil {
				e.t.Logf("seed %d: restart after a kill at a write failed (retried later): %v", e.seed, err)
			}
			<-e.life
		}
	}
}
