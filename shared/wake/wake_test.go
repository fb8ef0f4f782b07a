package wake

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

type observed struct {
	mu  sync.Mutex
	got map[metastore.ChainID]metastore.Cursor
}

func (o *observed) Absorbed(c metastore.ChainID, cur metastore.Cursor) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.got == nil {
		o.got = map[metastore.ChainID]metastore.Cursor{}
	}
	o.got[c] = cur
}

func (o *observed) at(c metastore.ChainID) metastore.Cursor {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got[c]
}

func setup(t *testing.T) (metastore.Store, chain.Set, *absorbtest.Star, metastore.ChainID) {
	t.Helper()
	meta := metastore.NewMem()
	set := chain.Set{Star: "star-0", Buckets: []objstore.Bucket{objstore.NewMem("a"), objstore.NewMem("b"), objstore.NewMem("c")}, W: 2}
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	fs, err := absorbtest.NewStar(context.Background(), meta, c, set)
	if err != nil {
		t.Fatal(err)
	}
	ids := absorbtest.StreamIDs(2)
	for i := 0; i < 5; i++ {
		if _, err := fs.Flight(context.Background(), ids, []int{2, 3}, int64(i), 16, 3); err != nil {
			t.Fatal(err)
		}
	}
	return meta, set, fs, c
}

// TestLocalAbsorbsAndReports: a release event runs the absorb in-process
// up to the released head and reports the checkpoint to the observer.
func TestLocalAbsorbsAndReports(t *testing.T) {
	meta, set, fs, c := setup(t)
	l := NewLocal(&absorb.Absorber{Meta: meta, Sets: absorb.Sets{Express: set}}, nil, nil)
	obs := &observed{}
	l.SetObserver(obs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx, 0)
	l.Released(ctx, c, fs.Released())
	deadline := time.Now().Add(5 * time.Second)
	for obs.at(c) != fs.Released() {
		if time.Now().After(deadline) {
			t.Fatalf("observer saw %s, want the released head %s", obs.at(c), fs.Released())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h, err := meta.GetHead(ctx, c)
	if err != nil || h.Checkpoint != fs.Released() {
		t.Fatalf("checkpoint %s (%v), want %s", h.Checkpoint, err, fs.Released())
	}
	if l.Health(c).MetastoreSlow {
		t.Fatal("a healthy metastore reported slow")
	}
}

// failing makes every GetHead fail as unavailable.
type failing struct{ metastore.Store }

func (failing) GetHead(context.Context, metastore.ChainID) (metastore.Head, error) {
	return metastore.Head{}, metastore.ErrUnavailable
}

// TestPollerReportsCheckpointAndMetastoreTrouble: the poller relays the
// head's checkpoint, and an unavailable metastore marks the chain slow.
func TestPollerReportsCheckpointAndMetastoreTrouble(t *testing.T) {
	meta, set, fs, c := setup(t)
	if _, err := (&absorb.Absorber{Meta: meta, Sets: absorb.Sets{Express: set}}).Run(context.Background(), c, fs.Released()); err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	p := &Poller{Meta: meta, Chains: []metastore.ChainID{c}, Observer: obs, Every: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	go p.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for obs.at(c) != fs.Released() {
		if time.Now().After(deadline) {
			t.Fatalf("poller relayed %s, want %s", obs.at(c), fs.Released())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	bad := &Poller{Meta: failing{meta}, Chains: []metastore.ChainID{c}, Observer: &observed{}, Every: time.Millisecond}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	bad.Run(ctx)
	if !bad.Health(c).MetastoreSlow {
		t.Fatal("an unavailable metastore was not reported slow")
	}
}
