package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/star"
)

var commandSeeds = flag.Int("command-seeds", 100, "seeds of TestSimCommands (seeds 1..n)")

// TestSimCommands: fencing and explicit trim through the simulation's
// faults (star kill -9 with batches in flight, takeover by a successor
// that recovers from refs, zone outages that halt the epoch and recover
// in-process, settlement and trim running meanwhile). Stream s0 carries
// the fence workload: writers append with the token they believe current,
// each record naming that token in a header, and fences move the token on.
// Stream s1 carries the trim workload. Invariants, checked against the
// records themselves and the acks the workload received:
//
//   - fence: in s0's history, every ordinary record carries the token of
//     the last fence record before it (so no append without the current
//     token was ever committed after a fence, acked or not); every acked
//     append is at its ack's seqs; no append refused with ErrFenced is in
//     the history;
//   - trim: after a trim is acked, no read (of any incarnation, through
//     the faults) returns a record of s1 below its trim point;
//   - reconfigure: stream s2 switches between client-require and
//     client-prefer; in its history no record without a client timestamp
//     (its header says so) follows a config record that set
//     client-require, and every acked append is there.
//   - trim applies the current command state (ADR 0045): a trim run
//     (trim.Trimmer.Streams, unfaulted oracle read before it) that ends
//     without an error or a conflict has dropped every leading settled
//     ref of s1 (but its last) that ends below the trim point of s1's
//     newest durable part (the window's, or else its last ref's), even
//     when its refs still carry an older one; and stream s3, whose
//     retention switches between 1 ms and 0 (keep forever), loses nothing
//     (its floor does not move) in a trim run that starts after keep
//     forever was acknowledged.
func TestSimCommands(t *testing.T) {
	seeds := []int64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		for i := 1; i <= *commandSeeds; i++ {
			seeds = append(seeds, int64(i))
		}
	}
	var fences, refused, trims, takeovers, configs, forever, trimRuns, expiredReads int
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/sim -run TestSimCommands -seed=%d -v", seed)
			synctest.Test(t, func(t *testing.T) {
				c := runCommands(t, seed, 60)
				fences, refused, trims, takeovers, configs = fences+c.fences, refused+c.refused, trims+c.trims, takeovers+c.takeovers, configs+c.configs
				forever, trimRuns, expiredReads = forever+c.forever, trimRuns+c.trimRuns, expiredReads+c.expiredReads
			})
		})
	}
	t.Logf("SUMMARY sim commands: seeds=%d fences_acked=%d appends_refused_by_fence=%d trims_acked=%d configs_acked=%d takeovers=%d keep_forever_acked=%d trim_runs_checked=%d expired_reads_checked=%d", len(seeds), fences, refused, trims, configs, takeovers, forever, trimRuns, expiredReads)
	if len(seeds) > 3 && (fences == 0 || refused == 0 || trims == 0 || takeovers == 0 || configs == 0 || forever == 0 || trimRuns == 0 || expiredReads == 0) {
		t.Fatalf("the workload did not exercise every command: %d fences, %d refused, %d trims, %d configs, %d keep forever, %d trim runs checked, %d expired reads checked, %d takeovers", fences, refused, trims, configs, forever, trimRuns, expiredReads, takeovers)
	}
}

type cmdSim struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	w    *World
	node *Node
	gen  int

	mu       sync.Mutex
	token    string            // the token of the last acked fence
	nextTok  int               // tokens are t1, t2, ...
	acked    map[uint64]string // s0 seq -> the token its acked append carried
	refusedB map[string]bool   // bodies of appends refused with ErrFenced
	trimAt   uint64            // s1's highest acked trim point
	wg       sync.WaitGroup    // appends in flight
	counts   struct{ fences, refused, trims, takeovers, configs, forever, trimRuns, expiredReads int }
	forever  bool                // s3's last acked retention is 0 (keep forever)
	retKnown bool                // s3's last Reconfigure was acked (none since failed: maybe committed)
	ackedS2  map[uint64]string   // s2 seq -> the body of its acked append
	bodies   map[string]struct{} // every body appended to s0 (unique)
	n        int
}

func runCommands(t *testing.T, seed int64, steps int) struct{ fences, refused, trims, takeovers, configs, forever, trimRuns, expiredReads int } {
	opt := DefaultOptions()
	opt.PassIndex = seed%2 == 0 // refs and the pass index (design 014)
	w, err := NewWorld(seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	c := &cmdSim{t: t, seed: seed, w: w, rng: rand.New(rand.NewPCG(uint64(seed), 0xfe4ce)),
		acked: map[uint64]string{}, refusedB: map[string]bool{}, bodies: map[string]struct{}{}, ackedS2: map[uint64]string{}}
	defer func() {
		c.wg.Wait()
		if c.node != nil {
			c.node.Kill()
		}
	}()
	c.restart()
	if c.node == nil {
		t.Fatal("the first star did not start")
	}
	for step := range steps {
		switch k := c.rng.IntN(26); {
		case k >= 24:
			c.retention()
		case k >= 22:
			c.trimStreams(fmt.Sprintf("step %d", step))
		case k >= 20:
			c.reconfigure()
		case k < 9:
			c.appendBurst()
		case k < 11:
			c.fence()
		case k < 13:
			c.trim()
		case k < 14:
			c.wg.Wait()
			c.restart() // kill -9 and a takeover, appends maybe in flight
		case k < 15:
			c.appendBurst()
			c.restart() // kill with appends in flight
		case k < 16:
			bad := c.rng.IntN(c.w.Opt.K)
			c.w.Inj[bad].SetDown(true) // one zone down: W=2 of 3 still ack
			c.appendBurst()
			c.w.Inj[(bad+1)%c.w.Opt.K].SetDown(true) // two down: the epoch halts
			time.Sleep(3 * time.Second)
			c.w.ClearFaults() // and recovers in-process
		case k < 18:
			go func() { _, _ = c.w.Settler().Run(context.Background(), Chain) }()
		default:
			go func() { _, _ = c.w.Trimmer().Run(context.Background(), Chain) }()
		}
		time.Sleep(time.Duration(1+c.rng.IntN(40)) * time.Millisecond)
		synctest.Wait()
		c.checkReads(fmt.Sprintf("step %d", step))
	}
	c.wg.Wait()
	c.w.ClearFaults()
	if c.node == nil {
		c.restart()
	}
	c.checkFenceHistory()
	c.checkConfigHistory()
	c.checkReads("end")
	c.trimStreams("end")
	return c.counts
}

func (c *cmdSim) restart() {
	if c.node != nil {
		c.node.Kill()
		c.node = nil
		c.counts.takeovers++
	}
	c.gen++
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := c.w.StartNode(ctx, c.gen, time.Second)
	if err != nil {
		c.t.Logf("seed=%d: incarnation %d did not start (retried): %v", c.seed, c.gen, err)
		return
	}
	c.node = n
}

// appendBurst starts appends to s0 by writers that carry the current
// token, a stale one, or none; they run in the background.
func (c *cmdSim) appendBurst() {
	n := c.node
	if n == nil {
		return
	}
	for range 1 + c.rng.IntN(4) {
		c.mu.Lock()
		tok := c.token
		switch c.rng.IntN(4) {
		case 0:
			tok = "" // a writer that never heard of the fence
		case 1:
			if c.nextTok > 1 {
				tok = fmt.Sprintf("t%d", c.rng.IntN(c.nextTok)+1) // maybe deposed
			}
		}
		c.n++
		b := fmt.Sprintf("b%d-%s", c.n, tok)
		c.bodies[b] = struct{}{}
		c.mu.Unlock()
		recs := []format.Record{{Body: []byte(b), Headers: []format.Header{{Name: []byte("tok"), Value: []byte(tok)}}}}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			a, err := n.Star.Append(ctx, c.w.IDs[0], recs, star.AppendOptions{FenceToken: tok})
			c.mu.Lock()
			defer c.mu.Unlock()
			switch {
			case err == nil:
				c.acked[a.FirstSeq] = b
			case errors.Is(err, star.ErrFenced):
				c.refusedB[b] = true
				c.counts.refused++
			}
		}()
	}
}

// fence fences s0 to the next token (carrying no expectation: a new writer
// takes over).
func (c *cmdSim) fence() {
	if c.node == nil {
		return
	}
	c.mu.Lock()
	c.nextTok++
	tok := fmt.Sprintf("t%d", c.nextTok)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.node.Star.Fence(ctx, c.w.IDs[0], tok, nil, nil); err == nil {
		c.mu.Lock()
		c.token = tok
		c.counts.fences++
		c.mu.Unlock()
	}
}

// trim appends a few records to s1 and trims it to a random seq at most
// its tail.
func (c *cmdSim) trim() {
	n := c.node
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// 3 KB records: s1's settled objects outgrow settle's merge
	// (MergeBelowBytes 2 KiB), so it has several refs to trim.
	if !c.appendSome(ctx, n, 1, bytes.Repeat([]byte("r"), 3000)) {
		return
	}
	tail, _, err := n.Star.Tail(c.w.IDs[1])
	if err != nil {
		return
	}
	_, point, err := n.Star.Trim(ctx, c.w.IDs[1], uint64(c.rng.Int64N(int64(tail)+1)), star.AppendOptions{})
	if err == nil {
		c.mu.Lock()
		if point < c.trimAt {
			c.mu.Unlock()
			c.t.Fatalf("seed=%d: trim point moved backward: %d after %d", c.seed, point, c.trimAt)
		}
		c.trimAt = point
		c.counts.trims++
		c.mu.Unlock()
	}
}

// checkReads: no read of s1 returns a record below the acked trim point,
// and none of s3 one past its acked retention (1 ms) when the read began
// (ADR 0075: whatever storage still holds).
func (c *cmdSim) checkReads(when string) {
	if c.node == nil {
		return
	}
	c.mu.Lock()
	at, expiring := c.trimAt, c.retKnown && !c.forever
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := c.w.Reader(c.node.Star, false)
	for _, start := range []read.Start{{}, {Kind: read.FromTimestamp}, {Kind: read.FromTailOffset, TailOffset: 1 << 40}} {
		res, err := r.Read(ctx, c.w.Streams[1], start, read.Limits{Count: 5})
		if err != nil {
			continue // a fault: the read failed, it returned nothing
		}
		for _, rec := range res.Records {
			if rec.Seq < at {
				c.t.Fatalf("seed=%d %s: a read from %+v returned seq %d, below the acknowledged trim point %d", c.seed, when, start, rec.Seq, at)
			}
		}
	}
	if !expiring {
		return
	}
	before := time.Now().UnixMilli() // the simulation's clock, as the reader's
	res, err := r.Read(ctx, c.w.Streams[3], read.Start{}, read.Limits{Count: 5})
	if err != nil {
		return
	}
	c.counts.expiredReads++
	for _, rec := range res.Records {
		if rec.TimestampMs < before-1 {
			c.t.Fatalf("seed=%d %s: a read of s3 (retention 1 ms, acked) at %d returned seq %d stamped %d, past its retention", c.seed, when, before, rec.Seq, rec.TimestampMs)
		}
	}
}

// checkFenceHistory reads s0 whole (raw stores) and checks the fence
// invariant against the records and the acks.
func (c *cmdSim) checkFenceHistory() {
	recs := c.history(0)
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := ""
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Seq != uint64(i) {
			c.t.Fatalf("seed=%d: s0 record %d has seq %d", c.seed, i, r.Seq)
		}
		switch format.CommandOf(r.Record) {
		case format.CommandFence:
			cur = string(r.Body)
			continue
		case format.CommandTrim:
			c.t.Fatalf("seed=%d: a trim record in s0 at %d", c.seed, r.Seq)
		}
		b := string(r.Body)
		if len(r.Headers) != 1 || string(r.Headers[0].Name) != "tok" || !strings.HasSuffix(b, "-"+string(r.Headers[0].Value)) {
			c.t.Fatalf("seed=%d: s0 seq %d: record %q is not the workload's", c.seed, r.Seq, b)
		}
		if tok := string(r.Headers[0].Value); tok != cur {
			c.t.Fatalf("seed=%d: s0 seq %d: an append carrying %q was committed while the stream was fenced to %q", c.seed, r.Seq, tok, cur)
		}
		if seen[b] {
			c.t.Fatalf("seed=%d: %q twice in s0", c.seed, b)
		}
		seen[b] = true
		if c.refusedB[b] {
			c.t.Fatalf("seed=%d: %q was refused (ErrFenced) but is at seq %d", c.seed, b, r.Seq)
		}
	}
	for seq, b := range c.acked {
		if seq >= uint64(len(recs)) || string(recs[seq].Body) != b {
			c.t.Fatalf("seed=%d: acked %q at seq %d is not there", c.seed, b, seq)
		}
	}
}

// reconfigure switches s2's timestamping mode and appends to it records
// with and without a client timestamp (the header "ts" says which), in the
// background, some of them racing the switch.
func (c *cmdSim) reconfigure() {
	n := c.node
	if n == nil {
		return
	}
	for range 1 + c.rng.IntN(4) {
		c.mu.Lock()
		c.n++
		b := fmt.Sprintf("c%d", c.n)
		c.mu.Unlock()
		rec := format.Record{Body: []byte(b), Headers: []format.Header{{Name: []byte("ts"), Value: []byte("none")}}}
		if c.rng.IntN(2) == 0 {
			rec = format.Record{TimestampMs: 1000, Body: []byte(b), Headers: []format.Header{{Name: []byte("ts"), Value: []byte("client")}}}
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if a, err := n.Star.Append(ctx, c.w.IDs[2], []format.Record{rec}, star.AppendOptions{}); err == nil {
				c.mu.Lock()
				c.ackedS2[a.FirstSeq] = b
				c.mu.Unlock()
			}
		}()
	}
	mode := uint8(metastore.TimestampClientRequire)
	if c.rng.IntN(2) == 0 {
		mode = uint8(metastore.TimestampClientPrefer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := n.Star.Reconfigure(ctx, c.w.IDs[2], star.ConfigPatch{TimestampMode: &mode}); err == nil {
		c.mu.Lock()
		c.counts.configs++
		c.mu.Unlock()
	}
}

// checkConfigHistory reads s2 whole: no record without a client timestamp
// after a config record that set client-require (before the next one), and
// every acked append at its seq.
func (c *cmdSim) checkConfigHistory() {
	recs := c.history(2)
	require := false
	for _, r := range recs {
		if format.CommandOf(r.Record) == format.CommandConfig {
			cfg, err := format.DecodeConfig(r.Body)
			if err != nil {
				c.t.Fatalf("seed=%d: s2 seq %d: config record: %v", c.seed, r.Seq, err)
			}
			require = cfg.TimestampMode == uint8(metastore.TimestampClientRequire)
			continue
		}
		if require && len(r.Headers) == 1 && string(r.Headers[0].Value) == "none" {
			c.t.Fatalf("seed=%d: s2 seq %d: a record without a timestamp was committed while the stream required client timestamps", c.seed, r.Seq)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for seq, b := range c.ackedS2 {
		if seq >= uint64(len(recs)) || string(recs[seq].Body) != b {
			c.t.Fatalf("seed=%d: acked %q at s2 seq %d is not there", c.seed, b, seq)
		}
	}
}

// history reads stream i whole from the raw stores, retrying while a
// settle or trim run makes the refs look torn.
func (c *cmdSim) history(i int) []star.SeqRecord {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []star.SeqRecord
	var err error
	for range 20 {
		if recs, _, err = ReadAll(ctx, c.w.Reader(c.node.Star, true), c.w.Streams[i]); err == nil {
			return recs
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("seed=%d: read s%d: %v", c.seed, i, err)
	return nil
}

// appendSome appends one to three records of body to stream i, one at a
// time; false when one failed.
func (c *cmdSim) appendSome(ctx context.Context, n *Node, i int, body []byte) bool {
	for range 1 + c.rng.IntN(3) {
		if _, err := n.Star.Append(ctx, c.w.IDs[i], []format.Record{{Body: body}}, star.AppendOptions{}); err != nil {
			return false
		}
	}
	return true
}

// retention appends to s3 and sets its retention to 1 ms or to 0 (keep
// forever); once acked, it records it in the stream's metadata as the
// server does (ReconfigureStream).
func (c *cmdSim) retention() {
	n := c.node
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !c.appendSome(ctx, n, 3, []byte("k")) {
		return
	}
	ms := []int64{0, 1}[c.rng.IntN(2)]
	if _, _, err := n.Star.Reconfigure(ctx, c.w.IDs[3], star.ConfigPatch{RetentionMs: &ms}); err != nil {
		c.mu.Lock()
		c.retKnown = false // maybe committed: reads may follow either
		c.mu.Unlock()
		return // maybe committed: trim must then keep the longer of it and the metadata's
	}
	st := c.w.Streams[3]
	if err := c.w.Meta.SetStreamConfig(ctx, st.Name, st.ID, ms, st.Timestamping); err != nil {
		c.t.Fatalf("seed=%d: record s3's retention: %v", c.seed, err)
	}
	c.mu.Lock()
	c.forever, c.retKnown = ms == 0, true
	if c.forever {
		c.counts.forever++
	}
	c.mu.Unlock()
}

// trimStreams runs trim's retention and trim point pass
// (Trimmer.Streams) and checks that it applied the current command state
// of s1 and kept everything of s3 under keep forever.
func (c *cmdSim) trimStreams(when string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s1 := c.w.Streams[1]
	// The oracle, unfaulted: s1's newest durable part's trim point, and
	// its refs as they are before the run.
	var last metastore.Ref
	var err error
	if win := c.w.Window(c.w.Meta, c.w.SettledMem); win != nil {
		last, err = win.LastRef(ctx, s1)
	} else {
		last, err = c.w.Meta.LastRef(ctx, s1.ID)
	}
	if err != nil && !errors.Is(err, metastore.ErrNotFound) {
		c.t.Fatalf("seed=%d %s: s1's last part: %v", c.seed, when, err)
	}
	var below uint64
	if last.Commands != nil {
		below = last.Commands.TrimSeq
	}
	before, err := c.w.Meta.QueryRefs(ctx, s1.ID, 0, 10000)
	if err != nil {
		c.t.Fatalf("seed=%d %s: s1's refs: %v", c.seed, when, err)
	}
	c.mu.Lock()
	forever := c.forever
	c.mu.Unlock()
	s3 := c.w.Streams[3]
	floor := func() uint64 {
		st, err := c.w.Meta.GetStream(ctx, s3.Name)
		if err != nil {
			c.t.Fatalf("seed=%d %s: s3: %v", c.seed, when, err)
		}
		return st.Floor
	}
	floor3 := floor()
	res, err := c.w.Trimmer().Streams(ctx)
	if forever {
		if f := floor(); f != floor3 {
			c.t.Fatalf("seed=%d %s: s3 keeps its records forever (acknowledged), yet a trim run raised its floor from %d to %d", c.seed, when, floor3, f)
		}
	}
	if err != nil || res.Conflicts > 0 {
		return // a fault or a race with settle: nothing to expect
	}
	c.mu.Lock()
	c.counts.trimRuns++
	c.mu.Unlock()
	for _, r := range before[:max(len(before)-1, 0)] {
		if !settledOnly(r) || r.LastSeq >= below {
			break // trim stops at the first ref it keeps
		}
		now, err := c.w.Meta.QueryRefs(ctx, s1.ID, r.FirstSeq, 1)
		if err != nil {
			c.t.Fatalf("seed=%d %s: s1's refs: %v", c.seed, when, err)
		}
		if len(now) > 0 && now[0].FirstSeq == r.FirstSeq && now[0].LastSeq < below {
			c.t.Fatalf("seed=%d %s: s1's ref %d-%d is below its trim point %d, yet a trim run kept it", c.seed, when, r.FirstSeq, r.LastSeq, below)
		}
	}
}

func settledOnly(r metastore.Ref) bool {
	for _, l := range r.Locations {
		if !l.Settled {
			return false
		}
	}
	return true
}
