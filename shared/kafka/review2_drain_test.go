package kafka

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReview2DrainHoldBounded (ADR 0071, attack): during a drain, a
// client opens many connections and pipelines far more produces on each
// than a producer keeps in flight, never reading an answer. Each produce
// is refused whole by the drain and held. What the front end holds per
// connection is bounded by maxPipelined (the reader stops once the
// writer's queue is full behind the held produce), not by what the client
// sends; and Close ends every held produce and every connection at once,
// so the drain finishes however many produces are held.
func TestReview2DrainHoldBounded(t *testing.T) {
	const conns, perConn = 16, 4 * maxPipelined
	core := newHandoverCore("s1", &handoverLog{next: map[string]uint64{}})
	core.drainAfter(0)
	s, addr := serveFront(t, core, "")
	var wg sync.WaitGroup
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perConn {
				// A write the server no longer reads blocks once the
				// socket buffers fill: give up then, the hold is what
				// this measures.
				c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				b := appendRequest(produceV7(0), int32(k))
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}()
	}
	// Let the readers take what they will.
	deadline := time.Now().Add(3 * time.Second)
	for last := -1; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n := core.refusals()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	held := core.refusals()
	t.Logf("%d produces held on %d connections, %d sent on each", held, conns, perConn)
	// One answer being resolved, maxPipelined queued, one read and
	// blocked on the full queue: maxPipelined+2 per connection at most.
	if limit := conns * (maxPipelined + 2); held > limit || held < conns {
		t.Fatalf("the drain refused and holds %d produces on %d connections (%d sent each); want between %d and %d", held, conns, perConn, conns, limit)
	}
	start := time.Now()
	s.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %s with %d produces held: the drain waits on them", took, held)
	}
	for i, c := range cs {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var b [1]byte
		if n, err := c.Read(b[:]); n != 0 || err == nil || isTimeout(err) {
			t.Fatalf("connection %d after Close: read %d bytes, %v; want it closed with no answer", i, n, err)
		}
	}
	wg.Wait()
	core.log.mu.Lock()
	defer core.log.mu.Unlock()
	if len(core.log.next) != 0 {
		t.Fatalf("the drain admitted appends: %v", core.log.next)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func appendRequest(r kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, r, corr)
}

// TestReview2StalledReaderClosed (attack, found by review2): a client
// pipelines requests and never reads an answer. Once the socket buffers
// are full the front end's writer blocks in Write, the reader blocks on
// the writer's full queue, and it no longer reads, so the idle timeout
// (a read deadline) never fires: the connection, its two goroutines and
// up to maxPipelined+1 requests and answers (8 MiB produces, fetch
// answers) were held until the process exited. The writer now has a
// write deadline of the idle timeout: a client that reads nothing that
// long is closed. It failed before (the connection was still open after
// 5 s with a 1 s idle timeout); it closes after about 1.5 s now.
func TestReview2StalledReaderClosed(t *testing.T) {
	core := newHandoverCore("s1", &handoverLog{next: map[string]uint64{}})
	core.drainAfter(-1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Core: core, Star: core.star, Limits: Limits{IdleTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	req := kmsg.NewPtrApiVersionsRequest() // a ~400-byte answer, no SASL needed
	req.Version = 2
	// 200,000 requests (about 5 MB) in one write, whole: their answers
	// (about 80 MB) fill every buffer between the front end and a client
	// that reads none of them.
	const n = 200_000
	var b []byte
	for k := range int32(n) {
		b = append(b, appendRequest(req, k)...)
	}
	go c.Write(b) // ends with an error when the connection closes
	deadline := time.Now().Add(5 * time.Second)
	for open := false; !open || s.meters.conns.Value() != 0; time.Sleep(20 * time.Millisecond) {
		open = open || s.meters.conns.Value() == 1
		if time.Now().After(deadline) {
			t.Fatalf("a client that read nothing for 5 s (idle timeout 1 s, %d requests sent) still holds its connection (open: %v)", n, open)
		}
	}
}
