package sim

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
)

var moveSeeds = flag.Int("move-seeds", 90, "seeds of TestSimMoves (seeds 1..n)")

// moveStars are the two stars of the move workload; s0 starts on the
// first. Seeds divisible by 5 add thirdStar (moves to either other star).
var moveStars = []string{StarID, "star-1"}

const thirdStar = "star-2"

// TestSimMoves: stream moves between two stars (ADR 0065) racing appends,
// takeovers (kill -9 of either star, a successor with a fresh server) and
// settle of both chains. Three idempotent producers append to s0 through
// the servers (mostly the leader the metastore names, sometimes the other
// star), each retrying a batch whose outcome it does not know with the
// same producer id and batch seq; a mover moves s0 to the other star
// through MoveStream, retrying an interrupted move to the same star.
// Invariants, checked against the stream's history (raw stores) and an
// independent tally of the acks:
//
//   - no acknowledged record lost or duplicated: seqs contiguous from 0,
//     every acknowledged batch at its acknowledged seqs, no batch twice;
//   - the move fence: the history is cut into segments by its seal
//     records, each led by one star (star-0, then each seal's target),
//     and every ack came from the leader of the segment holding its seqs:
//     after a move commits, the old star acknowledges nothing more of the
//     stream;
//   - a fenced stream moves with its token (seeds 1, 4, 7, ...: s0 is
//     fenced to a writer's token before the first append and every
//     producer carries it): no append with a stale token is ever
//     acknowledged, and after the last move the writer's token still
//     appends on the leader while a stale one is refused.
//
// Seeds 5, 10, 15, ... run a third star: a move goes to either other
// star, so a stream leaves a star whose window still holds its parts for
// a third one (on the pass index refused until settle flushed them, ADR
// 0065; a move back goes at once, ADR 0076), and every invariant above
// holds with the stream's parts in three chains. On every seed, settle
// must make progress on every chain once the faults are cleared.
func TestSimMoves(t *testing.T) {
	seeds := []int64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		for i := 1; i <= *moveSeeds; i++ {
			seeds = append(seeds, int64(i))
		}
	}
	var moves, seals, takeovers, acked, notLeader int
	var tally Tally
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/sim -run TestSimMoves -seed=%d -v", seed)
			synctest.Test(t, func(t *testing.T) {
				c, tl := runMoves(t, seed, 40)
				tally.Add(tl)
				moves, seals, takeovers, acked, notLeader = moves+c.moves, seals+c.seals, takeovers+c.takeovers, acked+c.acked, notLeader+c.notLeader
			})
		})
	}
	t.Logf("SUMMARY sim moves: seeds=%d moves_acked=%d seals_in_history=%d takeovers=%d batches_acked=%d refused_not_leader=%d %s", len(seeds), moves, seals, takeovers, acked, notLeader, tally)
	if len(seeds) > 3 && (moves == 0 || takeovers == 0 || acked == 0 || notLeader == 0) {
		t.Fatalf("the workload did not exercise moves: %d moves, %d takeovers, %d acked, %d refused", moves, takeovers, acked, notLeader)
	}
}

type moveCounts struct{ moves, seals, takeovers, acked, notLeader int }

// moveAck is one acknowledged batch: who acknowledged it, at which seqs.
type moveAck struct {
	star        string
	first, last uint64
	// retry: the producer sent the batch before (its outcome unknown), so
	// the answer may be the original's ack from the dedupe window,
	// whichever star gives it.
	retry bool
}

type moveProducer struct {
	id   format.ProducerID
	busy bool
	seq  uint64 // the batch seq of body
	body string // the batch whose outcome is not known yet ("": none)
	sent bool   // body was sent before
	n    int
}

type moveSim struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	w    *World
	gen  int

	stars []string // moveStars, and thirdStar on seeds divisible by 5

	mu     sync.Mutex
	nodes  map[string]*Node
	srvs   map[string]*server.Server
	acks   map[string]moveAck // body -> its ack
	prods  []*moveProducer
	target string // an interrupted move's target ("": none)
	token  string // s0's fencing token ("": not fenced)
	moving bool
	counts moveCounts
	tally  Tally
	wg     sync.WaitGroup
}

func runMoves(t *testing.T, seed int64, steps int) (moveCounts, Tally) {
	opt := DefaultOptions()
	opt.Streams = 1
	opt.PassIndex = seed%2 == 0
	w, err := NewWorld(seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	m := &moveSim{t: t, seed: seed, w: w, rng: rand.New(rand.NewPCG(uint64(seed), 0x40be)),
		nodes: map[string]*Node{}, srvs: map[string]*server.Server{}, acks: map[string]moveAck{}, stars: moveStars}
	if seed%5 == 0 {
		m.stars = append(slices.Clone(moveStars), thirdStar)
	}
	for i := range 3 {
		p := &moveProducer{}
		p.id[0], p.id[15] = 0x40, byte(i+1)
		m.prods = append(m.prods, p)
	}
	defer func() {
		m.wg.Wait()
		for _, n := range m.nodes {
			n.Kill()
		}
	}()
	for _, id := range m.stars {
		m.restart(id)
	}
	if seed%3 == 1 {
		m.fence("sim-writer-1")
	}
	for step := range steps {
		switch k := m.rng.IntN(20); {
		case k < 9:
			m.appendBurst()
		case k < 13:
			m.appendBurst()
			m.move()
		case k < 15:
			m.wg.Wait()
			m.restart(m.stars[m.rng.IntN(len(m.stars))])
		case k < 16:
			m.appendBurst()
			m.restart(m.stars[m.rng.IntN(len(m.stars))]) // kill with appends and maybe a move in flight
		default:
			ch := metastore.ChainID{Star: m.stars[m.rng.IntN(len(m.stars))], Class: metastore.Express}
			go func() { _, _ = w.Settler().Run(context.Background(), ch) }()
		}
		time.Sleep(time.Duration(1+m.rng.IntN(30)) * time.Millisecond)
		synctest.Wait()
		_ = step
	}
	m.wg.Wait()
	w.ClearFaults()
	for _, id := range m.stars {
		if m.nodes[id] == nil {
			m.restart(id)
		}
	}
	m.finish()
	m.fencedAfterMoves()
	m.settles()
	m.check()
	return m.counts, m.tally
}

// staleToken is a fencing token s0 never has.
const staleToken = "sim-writer-0"

// fence fences s0 to token on its first leader, before any append.
func (m *moveSim) fence(token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := m.srvs[moveStars[0]].Fence(ctx, connect.NewRequest(&strandv1.FenceRequest{Stream: m.w.Streams[0].Name, Token: token})); err != nil {
		m.t.Fatalf("seed=%d: fence s0: %v", m.seed, err)
	}
	m.token = token
}

// fencedAfterMoves: on a fenced s0, after the moves the leader refuses a
// stale token and appends with the writer's (recorded as an ack).
func (m *moveSim) fencedAfterMoves() {
	if m.token == "" {
		return
	}
	lead := m.leader()
	p := format.ProducerID{0x40, 15: 0xf}
	if _, err := m.appendWith(m.srvs[lead], p, 0, "stale-final", staleToken); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		m.t.Fatalf("seed=%d: an append with a stale token on %s after the moves: %v, want failed_precondition", m.seed, lead, err)
	}
	a, err := m.appendWith(m.srvs[lead], p, 0, "fenced-final", m.token)
	if err != nil {
		m.t.Fatalf("seed=%d: the writer's append on %s after the moves: %v", m.seed, lead, err)
	}
	a.star = lead
	m.acks["fenced-final"] = a
}

// restart kills star id's incarnation (if any) and starts a successor
// with a fresh server (no memory of earlier moves).
func (m *moveSim) restart(id string) {
	m.mu.Lock()
	old := m.nodes[id]
	delete(m.nodes, id)
	delete(m.srvs, id)
	m.gen++
	gen := m.gen
	m.mu.Unlock()
	if old != nil {
		old.Kill()
		m.counts.takeovers++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := m.w.StartNodeAs(ctx, gen, time.Second, id)
	if err != nil {
		m.t.Logf("seed=%d: %s incarnation %d did not start (retried later): %v", m.seed, id, gen, err)
		return
	}
	sc := m.w.ServerConfig(n, false)
	sc.Peers = map[string]string{}
	for _, s := range m.stars {
		sc.Peers[s] = ""
	}
	sc.PeerUp = func(_ context.Context, id, _ string) error { // no HTTP here: up while it runs
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.nodes[id] == nil {
			return fmt.Errorf("sim: star %s is down", id)
		}
		return nil
	}
	sc.DrainTimeout = 5 * time.Second
	srv, err := server.New(sc)
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.nodes[id], m.srvs[id] = n, srv
	m.mu.Unlock()
}

// leader is the star the metastore names for s0 (unfaulted).
func (m *moveSim) leader() string {
	st, err := m.w.Meta.GetStream(context.Background(), m.w.Streams[0].Name)
	if err != nil {
		m.t.Fatalf("seed=%d: s0: %v", m.seed, err)
	}
	return st.Star
}

// appendBurst starts one batch per idle producer: its unknown batch
// again (same producer id and batch seq), else a new one; mostly to the
// leader, sometimes to the other star.
func (m *moveSim) appendBurst() {
	for _, p := range m.prods {
		m.mu.Lock()
		if p.busy {
			m.mu.Unlock()
			continue
		}
		p.busy = true
		if p.body == "" {
			p.n++
			p.body = fmt.Sprintf("p%d-b%d", p.id[15], p.n)
		}
		to := m.leader()
		if m.rng.IntN(4) == 0 {
			to = m.other(to)
		}
		srv, body, seq, retry := m.srvs[to], p.body, p.seq, p.sent
		p.sent = true
		m.mu.Unlock()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			ack, err := m.appendTo(srv, p.id, seq, body)
			m.mu.Lock()
			defer m.mu.Unlock()
			p.busy = false
			switch {
			case err == nil:
				if prev, ok := m.acks[body]; ok && (prev.first != ack.first || prev.last != ack.last) {
					m.t.Errorf("seed=%d: %s acknowledged at %d..%d by %s and at %d..%d by %s: written twice", m.seed, body, prev.first, prev.last, prev.star, ack.first, ack.last, ack.star)
				}
				m.acks[body] = moveAck{star: to, first: ack.first, last: ack.last, retry: retry}
				m.counts.acked++
				p.body, p.seq, p.sent = "", p.seq+1, false
			case connect.CodeOf(err) == connect.CodeUnavailable && strings.Contains(err.Error(), "led by"):
				m.counts.notLeader++
			}
		}()
	}
	if m.token != "" && m.rng.IntN(4) == 0 {
		// A deposed writer's append: never acknowledged, before or after
		// a move.
		m.mu.Lock()
		srv := m.srvs[m.leader()]
		m.mu.Unlock()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if _, err := m.appendWith(srv, format.ProducerID{}, 0, "stale", staleToken); err == nil {
				m.t.Errorf("seed=%d: an append with a stale fencing token was acknowledged", m.seed)
			}
		}()
	}
}

func (m *moveSim) appendTo(srv *server.Server, p format.ProducerID, seq uint64, body string) (moveAck, error) {
	return m.appendWith(srv, p, seq, body, m.token)
}

// appendWith appends body as batch seq of producer p (none if zero) with
// fencing token token.
func (m *moveSim) appendWith(srv *server.Server, p format.ProducerID, seq uint64, body, token string) (moveAck, error) {
	if srv == nil {
		return moveAck{}, connect.NewError(connect.CodeUnavailable, fmt.Errorf("the star is down"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := &strandv1.AppendRequest{Stream: m.w.Streams[0].Name, FencingToken: token,
		Records: []*strandv1.AppendRecord{{Body: []byte(body)}}}
	if p != (format.ProducerID{}) {
		req.ProducerId, req.BatchSeq = p[:], &seq
	}
	res, err := srv.Append(ctx, connect.NewRequest(req))
	if err != nil {
		return moveAck{}, err
	}
	return moveAck{first: res.Msg.StartSeqNum, last: res.Msg.EndSeqNum - 1}, nil
}

// other is a star of the workload other than id: the other one of two,
// a random one of the others of three. Called with m.mu.
func (m *moveSim) other(id string) string {
	var others []string
	for _, s := range m.stars {
		if s != id {
			others = append(others, s)
		}
	}
	if len(others) == 1 {
		return others[0]
	}
	return others[m.rng.IntN(len(others))]
}

// move moves s0 to the other star (or finishes an interrupted move) in
// the background, racing the appends.
func (m *moveSim) move() {
	m.mu.Lock()
	if m.moving {
		m.mu.Unlock()
		return
	}
	from := m.leader()
	to := m.target
	if to == "" || to == from {
		to = m.other(from)
	}
	srv := m.srvs[from]
	if srv == nil {
		m.mu.Unlock()
		return
	}
	m.moving, m.target = true, to
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := srv.MoveStream(ctx, connect.NewRequest(&strandv1.MoveStreamRequest{Stream: m.w.Streams[0].Name, ToStar: to}))
		m.mu.Lock()
		defer m.mu.Unlock()
		m.moving = false
		if err == nil {
			m.target = ""
			m.counts.moves++
		}
	}()
}

// finish completes an interrupted move (faults cleared, both stars up)
// and opens s0 on its leader.
func (m *moveSim) finish() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for attempt := 0; ; attempt++ {
		from := m.leader()
		var err error
		if m.target != "" && m.target != from {
			_, err = m.srvs[from].MoveStream(ctx, connect.NewRequest(&strandv1.MoveStreamRequest{Stream: m.w.Streams[0].Name, ToStar: m.target}))
		}
		if err == nil {
			_, err = m.srvs[m.leader()].CheckTail(ctx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: m.w.Streams[0].Name}))
		}
		if err == nil {
			return
		}
		if attempt > 50 {
			m.t.Fatalf("seed=%d: s0 does not open on its leader %s with faults cleared: %v", m.seed, m.leader(), err)
		}
		for _, id := range m.stars { // an interrupted move may wait for settle
			_, _ = m.w.Settler().Run(ctx, metastore.ChainID{Star: id, Class: metastore.Express})
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settles checks that settle makes progress on every chain with the
// faults cleared: a chain whose settle fails at every step (a window it
// cannot flush) stops its refs, and a stream moved from it, for good.
func (m *moveSim) settles() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range m.stars {
		ch := metastore.ChainID{Star: id, Class: metastore.Express}
		var err error
		for range 20 {
			if _, err = m.w.Settler().Run(ctx, ch); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			m.t.Fatalf("seed=%d: settle of %s fails at every step with the faults cleared: %v", m.seed, ch, err)
		}
	}
}

// check reads s0 whole from the raw stores and checks the invariants.
func (m *moveSim) check() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lead := m.leader()
	st, err := m.w.Meta.GetStream(ctx, m.w.Streams[0].Name)
	if err != nil {
		m.t.Fatal(err)
	}
	recs, _, err := ReadAll(ctx, m.w.Reader(m.nodes[lead].Star, true), st)
	if err != nil {
		m.t.Fatalf("seed=%d: read s0: %v", m.seed, err)
	}
	leaderAt := make([]string, len(recs)) // the segment's leader, by seq
	at := map[string]uint64{}
	cur := moveStars[0]
	for i, r := range recs {
		if r.Seq != uint64(i) {
			m.t.Fatalf("seed=%d: s0 record %d has seq %d", m.seed, i, r.Seq)
		}
		leaderAt[i] = cur
		if format.CommandOf(r.Record) == format.CommandFence && r.Seq == 0 && m.token != "" && string(r.Body) == m.token {
			continue // the writer's fence, before any append
		}
		if format.CommandOf(r.Record) == format.CommandFence {
			to, ok := star.MoveTarget(string(r.Body))
			if !ok {
				m.t.Fatalf("seed=%d: a fence record at %d that is not a seal", m.seed, r.Seq)
			}
			m.counts.seals++
			cur = to // the records after the seal are the target's
			continue
		}
		b := string(r.Body)
		if _, twice := at[b]; twice {
			m.t.Fatalf("seed=%d: %s twice in s0 (seqs %d and %d)", m.seed, b, at[b], r.Seq)
		}
		at[b] = r.Seq
	}
	if cur != lead {
		m.t.Fatalf("seed=%d: the last seal names %s, the metastore %s", m.seed, cur, lead)
	}
	if m.token != "" && m.counts.seals == 0 {
		m.t.Fatalf("seed=%d: the fenced s0 never moved", m.seed)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The simulation's own checkers: the tally of acked records read back,
	// and the settled bucket's determined keys (both chains' settle
	// copies).
	acked := map[uint64]string{}
	for b, a := range m.acks {
		acked[a.first] = b
	}
	var ordinary []star.SeqRecord // the seals' bodies repeat: not the workload's
	for _, r := range recs {
		if format.CommandOf(r.Record) == "" {
			ordinary = append(ordinary, r)
		}
	}
	m.tally = CountRecords(acked, ordinary)
	if m.tally.Lost != 0 || m.tally.Duplicated != 0 {
		m.t.Fatalf("seed=%d: %s", m.seed, m.tally)
	}
	if v := m.w.Determined.Violations(); len(v) > 0 {
		m.t.Fatalf("seed=%d: determined keys put with other bytes: %v", m.seed, v)
	}
	for b, a := range m.acks {
		seq, ok := at[b]
		if !ok {
			m.t.Fatalf("seed=%d: %s acknowledged at %d by %s is not in s0: lost", m.seed, b, a.first, a.star)
		}
		if seq != a.first || a.last != a.first {
			m.t.Fatalf("seed=%d: %s acknowledged at %d..%d is at %d", m.seed, b, a.first, a.last, seq)
		}
		if leaderAt[seq] != a.star && !a.retry {
			m.t.Fatalf("seed=%d: %s at seq %d was acknowledged by %s, but %s led that segment of s0: a star acknowledged after the stream moved away", m.seed, b, seq, a.star, leaderAt[seq])
		}
	}
}
