// Package linear checks client histories for linearizability with
// porcupine: several clients append, read and check the tail of streams
// through the real API (the Go client over HTTP/2 to an in-process server
// on the simulated stores), every operation's call and return times are
// recorded, and the history must be explainable by one stream applying the
// operations one at a time.
package linear

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/sim"
	"github.com/strandlog/strand/tests/testnode"
)

type opKind uint8

const (
	opAppend opKind = iota
	opRead
	opTail
)

type input struct {
	stream string
	kind   opKind
	bodies []string // append
	from   uint64   // read
	// bound is the tail an operation that completed before the read began
	// observed (the reading client's own check-tail): the read must
	// return every record in [from, bound) unless it returns limit records.
	bound uint64
	limit int // read: the count limit asked for
	// producer and batchSeq: an idempotent append's producer (a client's
	// name for it; "" for an append the test does not name) and batch
	// seq. A retry is the same append again: same producer, batch seq
	// and bodies.
	producer string
	batchSeq uint64
}

type output struct {
	first, last uint64   // append: the acked seqs
	recs        []string // read: the bodies from `from`
	tail        uint64   // read, tail: the stream's next seq
}

// state is one stream's records and the acks of its idempotent batches
// by producer and batch seq; models are pure, so steps copy.
type state struct {
	recs []string
	acks map[batchKey]ack
}

type batchKey struct {
	producer string
	batchSeq uint64
}

// ack is a committed batch: its seqs and bodies (a retry must be the same
// batch).
type ack struct {
	first, last uint64
	bodies      string
}

func joined(bodies []string) string {
	h := fnv.New64a()
	for _, b := range bodies {
		h.Write([]byte(b))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%d:%x", len(bodies), h.Sum64())
}

// streamModel is the sequential specification of one stream.
var streamModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(input).stream
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return state{} },
	Step: func(st, in, out any) (bool, any) {
		ss, i, o := st.(state), in.(input), out.(output)
		s := ss.recs
		switch i.kind {
		case opAppend:
			k := batchKey{i.producer, i.batchSeq}
			if a, ok := ss.acks[k]; ok && i.producer != "" {
				// A retry of a committed batch: the original ack, and
				// nothing is appended again.
				return o.first == a.first && o.last == a.last && a.bodies == joined(i.bodies), ss
			}
			n := uint64(len(s))
			if o.first != n || o.last != n+uint64(len(i.bodies))-1 {
				return false, ss
			}
			next := state{recs: append(slices.Clone(s), i.bodies...), acks: ss.acks}
			if i.producer != "" {
				next.acks = make(map[batchKey]ack, len(ss.acks)+1)
				for k, v := range ss.acks {
					next.acks[k] = v
				}
				next.acks[k] = ack{o.first, o.last, joined(i.bodies)}
			}
			return true, next
		case opRead:
			// Strict: the records are s[from:from+n], and they reach at least
			// the bound observed before the read began unless the read
			// returned its limit. They may stop short of the tail the read
			// reports (that tail is read after the records, so a release
			// while the read runs can move it); the tail is the stream's.
			n := uint64(len(o.recs))
			if o.tail != uint64(len(s)) || i.from > uint64(len(s)) || n > uint64(len(s))-i.from {
				return false, ss
			}
			if len(o.recs) < i.limit && i.from+n < i.bound {
				return false, ss
			}
			return slices.Equal(o.recs, s[i.from:i.from+n]), ss
		case opTail:
			return o.tail == uint64(len(s)), ss
		}
		return false, ss
	},
	// The acks follow from the records and the appends that made them, but
	// two orders of concurrent appends can give the same records with
	// different acks: compare both.
	Equal: func(a, b any) bool {
		x, y := a.(state), b.(state)
		return slices.Equal(x.recs, y.recs) && maps.Equal(x.acks, y.acks)
	},
	Hash: func(st any) uint64 {
		h := fnv.New64a()
		for _, r := range st.(state).recs {
			h.Write([]byte(r))
			h.Write([]byte{0})
		}
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		switch i.kind {
		case opAppend:
			if i.producer != "" {
				return fmt.Sprintf("%s append %v as %s#%d -> [%d,%d]", i.stream, i.bodies, i.producer, i.batchSeq, o.first, o.last)
			}
			return fmt.Sprintf("%s append %v -> [%d,%d]", i.stream, i.bodies, o.first, o.last)
		case opRead:
			return fmt.Sprintf("%s read from %d (bound %d, limit %d) -> %v tail %d", i.stream, i.from, i.bound, i.limit, o.recs, o.tail)
		}
		return fmt.Sprintf("%s check-tail -> %d", i.stream, o.tail)
	},
}

// readLimit is the count limit of the clients' reads: small enough that
// some reads return it (and may then stop before their bound).
const readLimit = 100

type recorder struct {
	mu  sync.Mutex
	ops []porcupine.Operation
	t0  time.Time
}

func (r *recorder) add(client int, in input, call time.Time, out output, ret time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call.Sub(r.t0).Nanoseconds(), Output: out, Return: ret.Sub(r.t0).Nanoseconds()})
}

// run starts a star with its API on the simulated stores (faults
// configured by inject while clients run) and has `clients` clients make
// `ops` operations each on two streams; every operation must succeed, and
// the history must be linearizable.
func run(t *testing.T, seed int64, clients, ops int, inject func(w *sim.World, stop <-chan struct{})) {
	a := testnode.StartWorld(t, seed, false, nil, nil)
	w, ts := a.W, a.TS
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{w.Streams[0].Name, w.Streams[1].Name}
	rec := &recorder{t0: time.Now()}
	stop := make(chan struct{})
	var injWG sync.WaitGroup
	if inject != nil {
		injWG.Add(1)
		go func() { defer injWG.Done(); inject(w, stop) }()
	}
	var wg sync.WaitGroup
	var retries atomic.Int64            // appends sent again with their producer and batch seq
	errs := make(chan error, 2*clients) // a client and its racing retry
	for ci := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(ci)))
			// The client's own named producer: its batch seq per stream.
			var pid client.ProducerID
			for i := range pid {
				pid[i] = byte(rng.Uint32())
			}
			nextBatch := map[string]uint64{}
			for k := range ops {
				in := input{stream: names[rng.IntN(len(names))]}
				var out output
				call := time.Now()
				var err error
				switch r := rng.IntN(10); {
				case r < 5:
					in.kind = opAppend
					var recs []client.Record
					for j := range 1 + rng.IntN(3) {
						b := fmt.Sprintf("c%d.%d.%d", ci, k, j)
						in.bodies = append(in.bodies, b)
						recs = append(recs, client.Record{Body: []byte(b)})
					}
					// Two appends in three name their producer and batch
					// seq; of those, some are sent twice at once (a retry
					// racing its original) and some again after their ack
					// (a retry whose first answer was lost): every copy
					// must get the original ack, and the batch is in the
					// stream once (the model's acks).
					var opt client.AppendOptions
					if rng.IntN(3) > 0 {
						opt.Producer, opt.BatchSeq = &pid, nextBatch[in.stream]
						in.producer, in.batchSeq = fmt.Sprintf("p%d", ci), nextBatch[in.stream]
					}
					send := func(in input) (output, time.Time, time.Time, error) {
						call := time.Now()
						a, err := c.Append(ctx, in.stream, recs, opt)
						return output{first: a.StartSeq, last: a.EndSeq - 1, tail: a.NextSeq}, call, time.Now(), err
					}
					var raced chan struct{}
					if in.producer != "" && rng.IntN(5) == 0 {
						raced = make(chan struct{})
						go func() {
							defer close(raced)
							o, c0, r0, err := send(in)
							if err != nil {
								errs <- fmt.Errorf("client %d op %d (racing retry): %w", ci, k, err)
								return
							}
							rec.add(ci, in, c0, o, r0)
							retries.Add(1)
						}()
					}
					out, call, _, err = send(in)
					if raced != nil {
						<-raced
					}
					if err == nil && in.producer != "" {
						if rng.IntN(5) == 0 {
							o, c0, r0, err := send(in)
							if err != nil {
								errs <- fmt.Errorf("client %d op %d (retry): %w", ci, k, err)
								return
							}
							rec.add(ci, in, c0, o, r0)
							retries.Add(1)
						}
						nextBatch[in.stream]++
					}
				case r < 8:
					in.kind = opRead
					var tail client.Tail
					tail, err = c.CheckTail(ctx, in.stream)
					if err == nil {
						in.from = uint64(rng.IntN(int(tail.NextSeq) + 1))
						in.bound, in.limit = tail.NextSeq, readLimit
						call = time.Now() // the read is the operation; the tail picked `from` and fixed its bound
						var res client.ReadResult
						res, err = c.Read(ctx, in.stream, client.FromSeq(in.from), client.Limits{Count: readLimit})
						for _, r := range res.Records {
							out.recs = append(out.recs, string(r.Body))
						}
						out.tail = res.NextSeq
					}
				default:
					in.kind = opTail
					var tail client.Tail
					tail, err = c.CheckTail(ctx, in.stream)
					out.tail = tail.NextSeq
				}
				ret := time.Now()
				if err != nil {
					errs <- fmt.Errorf("client %d op %d: %w", ci, k, err)
					return
				}
				rec.add(ci, in, call, out, ret)
			}
		}()
	}
	wg.Wait()
	close(stop)
	injWG.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res, info := porcupine.CheckOperationsVerbose(streamModel, rec.ops, 30*time.Second)
	appends, records := 0, 0
	batches := map[[2]any]bool{} // the stream, producer and batch seq of each named batch counted
	for _, op := range rec.ops {
		if in := op.Input.(input); in.kind == opAppend {
			appends++
			k := [2]any{in.stream, batchKey{in.producer, in.batchSeq}}
			if in.producer != "" && batches[k] {
				continue // a retry: its records are the original's
			}
			batches[k] = true
			records += len(in.bodies)
		}
	}
	short, limited := 0, 0
	for _, op := range rec.ops {
		if in, o := op.Input.(input), op.Output.(output); in.kind == opRead {
			if uint64(len(o.recs)) < o.tail-in.from {
				short++
			}
			if len(o.recs) >= in.limit {
				limited++
			}
		}
	}
	t.Logf("reads that stopped short of the tail they report: %d (that returned their limit: %d)", short, limited)
	if res != porcupine.Ok {
		path := t.TempDir() + "/history.html"
		_ = porcupine.VisualizePath(streamModel, info, path)
		t.Errorf("history of %d operations is %s (visualization: %s)", len(rec.ops), res, path)
	}
	var tally sim.Tally
	defer func() {
		// Deferred: printed also when the read-back fails.
		t.Logf("LINEAR seed=%d: operations=%d appends=%d idempotent_retries=%d faults_injected=%d result=%s %s", seed, len(rec.ops), appends, retries.Load(), w.Faults(), res, tally)
	}()
	tally = readBack(t, ctx, c, names, rec.ops)
	if int64(records) != tally.Acked || tally.Lost != 0 || tally.Duplicated != 0 {
		t.Errorf("read back after the run: %s (the clients booked %d acked records)", tally, records)
	}
}

// readBack reads every stream from seq 0 to its tail through the client
// after the run and counts the acked records (booked from the appends'
// acks) read back at their seqs, lost, and duplicated.
func readBack(t *testing.T, ctx context.Context, c *client.Client, names []string, ops []porcupine.Operation) sim.Tally {
	t.Helper()
	var total sim.Tally
	for _, name := range names {
		book := map[uint64]string{}
		for _, op := range ops {
			if in, o := op.Input.(input), op.Output.(output); in.kind == opAppend && in.stream == name {
				for k, b := range in.bodies {
					book[o.first+uint64(k)] = b
				}
			}
		}
		var got []star.SeqRecord
		tail, err := c.CheckTail(ctx, name)
		if err != nil {
			t.Fatalf("check the tail of %s: %v", name, err)
		}
		for from := uint64(0); from < tail.NextSeq; {
			res, err := c.Read(ctx, name, client.FromSeq(from), client.Limits{})
			if err != nil {
				t.Fatalf("read %s back from %d: %v", name, from, err)
			}
			if len(res.Records) == 0 {
				t.Fatalf("read %s back from %d: no records below the tail %d", name, from, tail.NextSeq)
			}
			for _, r := range res.Records {
				got = append(got, star.SeqRecord{Seq: r.Seq, Record: format.Record{Body: r.Body}})
			}
			from = res.Records[len(res.Records)-1].Seq + 1
		}
		total.Add(sim.CountRecords(book, got))
	}
	return total
}

// TestLinearizable: a clean run.
func TestLinearizable(t *testing.T) {
	run(t, 1, 8, 150, nil)
}

// TestLinearizableUnderFaults: one zone goes down and comes back, another
// loses PUT answers (landed or not), a zone turns slow: producers see no
// error and the history stays linearizable.
func TestLinearizableUnderFaults(t *testing.T) {
	run(t, 2, 8, 150, func(w *sim.World, stop <-chan struct{}) {
		rng := rand.New(rand.NewPCG(2, 2))
		for i := 0; ; i++ {
			select {
			case <-stop:
				w.ClearFaults()
				return
			case <-time.After(20 * time.Millisecond):
			}
			switch i % 4 {
			case 0:
				w.Inj[0].SetDown(true)
			case 1:
				w.Inj[0].SetDown(false)
				w.Inj[1].ForceAmbiguous(1+rng.IntN(3), rng.IntN(2) == 0)
			case 2:
				_ = w.Inj[2].SetLatency(time.Millisecond, 30*time.Millisecond)
			case 3:
				_ = w.Inj[2].SetLatency(0, 0)
			}
		}
	})
}

// TestCheckerRejectsANonLinearizableHistory: the model is not vacuous: a
// read that misses an append acknowledged before it started is caught, with
// the wrong tail and with the right one; so is a retried idempotent batch
// committed twice (a second ack, or the original ack and its records twice)
// or given another batch's ack.
func TestCheckerRejectsANonLinearizableHistory(t *testing.T) {
	appendOp := func(client int, call, ret int64, first uint64, bodies ...string) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: input{stream: "s", kind: opAppend, bodies: bodies}, Call: call,
			Output: output{first: first, last: first + uint64(len(bodies)) - 1}, Return: ret}
	}
	idemOp := func(client int, call, ret int64, producer string, batchSeq, first uint64, bodies ...string) porcupine.Operation {
		op := appendOp(client, call, ret, first, bodies...)
		in := op.Input.(input)
		in.producer, in.batchSeq = producer, batchSeq
		op.Input = in
		return op
	}
	readAt := func(call, ret int64, from, bound uint64, limit int, recs []string, tail uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: 3, Input: input{stream: "s", kind: opRead, from: from, bound: bound, limit: limit}, Call: call,
			Output: output{recs: recs, tail: tail}, Return: ret}
	}
	tailAt := func(call, ret int64, tail uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: 3, Input: input{stream: "s", kind: opTail}, Call: call, Output: output{tail: tail}, Return: ret}
	}
	readOp := func(from, bound uint64, limit int, recs []string, tail uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: input{stream: "s", kind: opRead, from: from, bound: bound, limit: limit}, Call: 20,
			Output: output{recs: recs, tail: tail}, Return: 30}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"a read that misses an earlier acked append (wrong tail)", []porcupine.Operation{appendOp(0, 0, 10, 0, "a"), readOp(0, 1, 10, nil, 0)}, false},
		{"a read that returns nothing below its bound (right tail)", []porcupine.Operation{appendOp(0, 0, 10, 0, "a"), readOp(0, 1, 10, nil, 1)}, false},
		{"a read that misses a middle record (right tail)", []porcupine.Operation{appendOp(0, 0, 10, 0, "a", "b", "c"), readOp(0, 3, 10, []string{"a", "c"}, 3)}, false},
		{"a read that drops its last record below its bound (right tail)", []porcupine.Operation{appendOp(0, 0, 10, 0, "a", "b", "c"), readOp(1, 3, 10, []string{"b"}, 3)}, false},
		{"a read serving a record nobody appended", []porcupine.Operation{appendOp(0, 0, 10, 0, "a"), readOp(0, 1, 10, []string{"b"}, 1)}, false},
		{"a correct read", []porcupine.Operation{appendOp(0, 0, 10, 0, "a"), readOp(0, 1, 10, []string{"a"}, 1)}, true},
		{"a read that returned its limit before its bound", []porcupine.Operation{appendOp(0, 0, 10, 0, "a", "b", "c"), readOp(0, 3, 2, []string{"a", "b"}, 3)}, true},
		{"a read short of a tail that moved after its bound was fixed", []porcupine.Operation{
			appendOp(0, 0, 10, 0, "a"), appendOp(2, 15, 40, 1, "b"), readOp(0, 1, 10, []string{"a"}, 2)}, true},
		// Idempotent retries (issue 14): a retry of a committed batch gets
		// the original ack and appends nothing.
		{"a retry committed twice (a second ack)", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), idemOp(0, 12, 18, "p", 0, 1, "a")}, false},
		{"a retry committed twice, seen by a read (the original ack)", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), idemOp(0, 12, 18, "p", 0, 0, "a"), readAt(40, 50, 0, 2, 10, []string{"a", "a"}, 2)}, false},
		{"a retry committed twice, seen by the tail", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), idemOp(0, 12, 18, "p", 0, 0, "a"), tailAt(40, 50, 2)}, false},
		{"a retry given another batch's ack", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), appendOp(1, 11, 12, 1, "b"), idemOp(0, 13, 18, "p", 0, 1, "a")}, false},
		{"a retry given the original ack", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), idemOp(0, 12, 18, "p", 0, 0, "a"), readAt(40, 50, 0, 1, 10, []string{"a"}, 1)}, true},
		{"a retry racing its original", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), idemOp(1, 2, 15, "p", 0, 0, "a"), appendOp(2, 20, 25, 1, "b"), tailAt(40, 50, 2)}, true},
		{"the next batch of the producer is appended", []porcupine.Operation{
			idemOp(0, 0, 10, "p", 0, 0, "a"), idemOp(0, 12, 18, "p", 1, 1, "b"), readAt(40, 50, 0, 2, 10, []string{"a", "b"}, 2)}, true},
	} {
		if got := porcupine.CheckOperations(streamModel, tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable=%v, want %v", tc.name, got, tc.ok)
		}
	}
}
