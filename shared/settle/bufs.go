package settle

// objBufs is a Settler's free list of object buffers: the settled objects
// it builds (build) and the packs it copies segments into (writePacks).
// Each object is written once, put, and dropped; with a new buffer per
// object, settle touched new memory for every byte it settled, and on the
// virtual machines the figures come from new memory costs 1-4 s a GiB to
// touch (issue 36, ADR 0068): SettledBuilder.Add's copy was a third of
// the default mode's CPU in `strand bench`. A buffer goes back once the
// put that was lent it returned (objstore's contract: after PutIfAbsent
// returns, the bucket holds no reference to body; ADR 0072), so settle
// lends its objects (PutIfAbsent), never gives them (objstore.PutGiven:
// a Keeper may keep the very slice). At most keptBufs buffers are kept,
// each at most the largest object asked for: with the defaults, 16 x 8
// MiB of records, never more than a step's flushWorkers renders hold at
// its peak anyway.
type objBufs struct {
	free chan []byte
}

// keptBufs is how many buffers a Settler keeps between objects: a
// step's flushes render up to flushWorkers objects at once (each waits
// for its reads and its put between renders), its packs one at a time;
// 16 cover the streams one step flushes at full speed in `strand bench`.
const keptBufs = 16

// bufs is s's free list, made on first use.
func (s *Settler) bufs() *objBufs {
	s.bufsOnce.Do(func() { s.objBufs = &objBufs{free: make(chan []byte, keptBufs)} })
	return s.objBufs
}

// get returns an empty buffer of capacity at least n: a kept one when it
// is large enough (one that is not is dropped), else a new one.
func (p *objBufs) get(n int) []byte {
	select {
	case b := <-p.free:
		if cap(b) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}

// put keeps b for a later get, unless keptBufs are kept. The caller must
// not use b after, and no bucket may hold it (a put that was lent b has
// returned).
func (p *objBufs) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}
