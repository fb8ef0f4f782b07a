package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/star"
)

// The tail recovery's checks in TestSimEdges (the hunt for "next seq
// moved backward", design 014 notes): a restart recovers each stream's
// tail from its last part or ref (star.RecoverStream through the window,
// World.RefReader) and its floor. A start comes about one step in ten;
// the probe recovers a tail every few virtual milliseconds, and each
// start is checked against what the killed incarnation acknowledged.

// killedTails notes, at a kill, each live stream's acknowledged tail in
// the closed incarnation (its final one: Close acks nothing more) and the
// lowest seq its flight index still held (below it, everything was
// absorbed). Called with e.mu held.
func (e *edges) killedTails(n *Node) {
	for _, es := range e.liveStreams() {
		tail, _, err := n.Star.Tail(es.id)
		if err != nil {
			continue
		}
		_, low, _ := n.Star.ReadIndex(es.id, tail, 1, 1)
		es.killedTail, es.killedLow, es.killedGen = tail, low, n.Gen
	}
}

// checkOpened: the tail a start opened each stream at is never below the
// tail the incarnation before it acknowledged (every seq below that tail
// was durable when it was acknowledged). Called with e.mu held, once n
// has opened the streams.
func (e *edges) checkOpened(ctx context.Context, n *Node) {
	for _, es := range e.liveStreams() {
		if es.killedGen == 0 {
			continue
		}
		tail, _, err := n.Star.Tail(es.id)
		if err != nil || tail >= es.killedTail {
			continue
		}
		e.fail(fmt.Errorf("%s.%d: incarnation %d opened it at next seq %d, below the tail %d incarnation %d acknowledged before it was killed (%s; its flight index then held seqs from %d); %s",
			es.name, es.gen, n.Gen, tail, es.killedTail, es.killedGen, e.killedAt, es.killedLow, e.describe(ctx, es)))
	}
}

// probeRecovery recovers a random live stream's tail as a successor would
// (a window of its own, cold, as a start's) every few virtual
// milliseconds, racing settle, trim, the probe and the absorb: the
// recovered next seq (with the floor, as a start takes it) is never below
// the lowest seq the running incarnation's flight index held before the
// recovery began, since every seq below that was absorbed (star.ReadIndex:
// "refs ... are guaranteed to cover them"). Its metastore calls take a
// seeded delay, so settle and trim move between them.
func (e *edges) probeRecovery(ctx context.Context, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7ec0))
	meta := NewMetaFaults(e.w.Meta, seed*7+6)
	meta.SetShortPages(0.3)
	for ctx.Err() == nil {
		time.Sleep(time.Duration(2+rng.IntN(20)) * time.Millisecond)
		e.mu.Lock()
		n, cands := e.node, e.liveStreams()
		if n == nil || len(cands) == 0 {
			e.mu.Unlock()
			continue
		}
		es := cands[rng.IntN(len(cands))]
		_, low, err := n.Star.ReadIndex(es.id, 0, 1, 1)
		e.mu.Unlock()
		if err != nil {
			continue // drained, or not open in this incarnation
		}
		meta.SetDelay(time.Duration(rng.IntN(4)) * time.Millisecond)
		var refs star.RefReader = meta
		if e.win != nil {
			refs = (&passindex.Window{Meta: meta, Bucket: e.w.SettledMem}).ForStream(es.meta)
		}
		info, err := star.RecoverStream(ctx, refs, es.id, metastore.Express, time.Now())
		if err != nil {
			continue // a torn view (an object trim deleted under it): a start fails and is retried
		}
		st, err := meta.GetStream(ctx, es.name)
		if err != nil || st.ID != es.meta.ID {
			continue // deleted meanwhile
		}
		e.mu.Lock()
		if es.state == live && max(info.Next, st.Floor) < low {
			e.fail(fmt.Errorf("%s.%d: a recovery now would open it at next seq %d (floor %d), below seq %d, the lowest its flight index held (incarnation %d) before the recovery began (everything below was absorbed); %s",
				es.name, es.gen, info.Next, st.Floor, low, n.Gen, e.describe(ctx, es)))
		}
		e.probes++
		edgeTotals.probes.Add(1)
		e.mu.Unlock()
	}
}

// describe is what the metastore and the window say of es now: its
// floor, last refs, its parts in the window, the chain head and the
// epochs, for a failure's report.
func (e *edges) describe(ctx context.Context, es *edgeStream) string {
	var b strings.Builder
	st, err := e.w.Meta.GetStream(ctx, es.name)
	fmt.Fprintf(&b, "stream %s floor %d (%v)", es.id, st.Floor, err)
	h, err := e.w.Meta.GetHead(ctx, Chain)
	fmt.Fprintf(&b, "; head %+v (%v)", h, err)
	for ep := uint64(1); ep <= h.Epoch; ep++ {
		rec, err := e.w.Meta.GetEpoch(ctx, Chain, ep)
		if err != nil {
			fmt.Fprintf(&b, "; epoch %d: %v", ep, err)
			continue
		}
		fmt.Fprintf(&b, "; epoch %d %v cut %d", ep, rec.State, rec.Cut)
	}
	var refs []metastore.Ref
	for from := uint64(0); ; {
		page, err := e.w.Meta.QueryRefs(ctx, es.id.String(), from, 100)
		if err != nil {
			fmt.Fprintf(&b, "; refs from %d: %v", from, err)
			break
		}
		if len(page) == 0 {
			break
		}
		refs = append(refs, page...)
		from = page[len(page)-1].LastSeq + 1
	}
	fmt.Fprintf(&b, "; %d refs, the last:", len(refs))
	for _, r := range refs[max(0, len(refs)-4):] {
		fmt.Fprintf(&b, " %d..%d", r.FirstSeq, r.LastSeq)
	}
	if win := e.w.Window(e.w.Meta, e.w.SettledMem); win != nil {
		parts, err := win.StreamParts(ctx, es.meta, 0)
		fmt.Fprintf(&b, "; %d parts in the window (%v), the last:", len(parts), err)
		for _, p := range parts[max(0, len(parts)-4):] {
			fmt.Fprintf(&b, " %d..%d@%v", p.FirstSeq, p.LastSeq, locs(p))
		}
		last, err := win.LastRef(ctx, es.meta)
		fmt.Fprintf(&b, "; window LastRef %d..%d (%v)", last.FirstSeq, last.LastSeq, err)
	}
	fmt.Fprintf(&b, "; last start: %s", es.opened)
	if es.killedGen > 0 {
		fmt.Fprintf(&b, "; incarnation %d was killed (%s) at tail %d, its flight index holding seqs from %d", es.killedGen, e.killedAt, es.killedTail, es.killedLow)
	}
	// The star's latest epoch events (starts, fences, halts, recoveries).
	var events []string
	lines := e.w.Logs.Lines()
	for _, l := range lines {
		for _, m := range []string{"star started", "leading chain", "fenced epoch", "epoch halted", "epoch recovered", "leadership lost"} {
			if strings.HasPrefix(l, m) {
				events = append(events, l)
			}
		}
	}
	fmt.Fprintf(&b, "; the star's last epoch events of %d log lines:\n\t%s", len(lines), strings.Join(events[max(0, len(events)-12):], "\n\t"))
	return b.String()
}

func locs(r metastore.Ref) string {
	var s []string
	for _, l := range r.Locations {
		s = append(s, l.Key)
	}
	return strings.Join(s, ",")
}
