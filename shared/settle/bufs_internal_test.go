package settle

import "testing"

// The free list keeps at most keptBufs buffers, hands a kept one out
// only when it is large enough (and drops one that is not), and a buffer
// it hands out is empty.
func TestObjBufsBounded(t *testing.T) {
	p := &objBufs{free: make(chan []byte, keptBufs)}
	for i := range keptBufs + 4 {
		p.put(make([]byte, 5, 100+i))
	}
	if len(p.free) != keptBufs {
		t.Fatalf("%d buffers kept, want %d", len(p.free), keptBufs)
	}
	if b := p.get(50); len(b) != 0 || cap(b) < 100 || cap(b) >= 100+keptBufs {
		t.Fatalf("get(50): len %d cap %d: want a kept buffer, emptied", len(b), cap(b))
	}
	if b := p.get(1 << 20); cap(b) < 1<<20 || len(p.free) != keptBufs-2 {
		t.Fatalf("get(1 MiB): cap %d, %d kept: want a new buffer and the small one dropped", cap(b), len(p.free))
	}
	p.put(nil)
	if len(p.free) != keptBufs-2 {
		t.Fatalf("a nil buffer was kept")
	}
}
