package bench

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
)

// TestWrappersForwardGivenAndViewed: the bench's bucket wrappers forward
// objstore.PutGiven and objstore.View to the memory bucket, so settle's
// puts and reads copy nothing there (issue 36), and the GET model still
// counts a view as a GET. Without the forwarding the results are the same
// but copied, which only this test sees.
func TestWrappersForwardGivenAndViewed(t *testing.T) {
	ctx := context.Background()
	gets := &getCount{}
	// The settled bucket's wrappers, as inproc.go stacks them.
	settled := &countingPuts{Bucket: withGetModel(objstore.NewMem("settled"), GetModel{}, newLognormal(1, 1, Latency{}), gets), n: &atomic.Int64{}}
	body := []byte("a settled object, given")
	if err := objstore.PutGiven(ctx, settled, "streams/a", body); err != nil {
		t.Fatal(err)
	}
	got, err := objstore.View(ctx, settled, "streams/a", 0, -1)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("view: %q, %v", got, err)
	}
	if &got[0] != &body[0] {
		t.Error("the settled bucket's wrappers copied a given body or a viewed one")
	}
	if gets.gets.Load() != 1 || settled.n.Load() != 1 {
		t.Errorf("%d GETs modelled, %d PUTs counted; want 1 and 1", gets.gets.Load(), settled.n.Load())
	}
	// A chain bucket's wrappers: the model over the recorder over faults.
	mem := objstore.NewMem("chain")
	if err := mem.PutIfAbsent(ctx, "chains/x", []byte("a flight")); err != nil {
		t.Fatal(err)
	}
	chain := withGetModel(&recording{Bucket: objstore.WithFaults(mem, objstore.NewInjector(1))}, GetModel{}, newLognormal(1, 2, Latency{}), gets)
	v1, err1 := objstore.View(ctx, chain, "chains/x", 2, 6)
	v2, err2 := objstore.View(ctx, chain, "chains/x", 2, 6)
	if err1 != nil || err2 != nil || string(v1) != "flight" || &v1[0] != &v2[0] {
		t.Errorf("chain views %q, %q (%v, %v): want the same stored bytes twice", v1, v2, err1, err2)
	}
}
