package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
)

// TestSwitchOnRestart: a node runs in refs mode (settle held back, so its
// chains keep absorbed, unsettled refs passes) with idempotent producers;
// the next node (a new star epoch) has the pass index on: it recovers
// every tail and the producers' dedupe marks from the refs, its absorb
// switches the chains (Head.Indexed), settle settles the refs passes in
// refs mode and the rest into runs, trim deletes the slots; every acked
// record reads back from every seq and by timestamp, across a third
// start (recovering from the mixed chain), and a node with the pass
// index off is then refused (absorb.ErrIndexed).
func TestSwitchOnRestart(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	start := modeStarter(t, meta)
	refsNode := func() (*Node, *client.Client) {
		n, c, err := start(false, time.Hour, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n, c
	}
	onNode := func() (*Node, *client.Client) {
		n, c, err := start(true, 20*time.Millisecond, 300, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n, c
	}
	streams := []string{"s-standard", "s-express"}
	prod := client.ProducerID{1, 2, 3}
	batch := map[string]uint64{}
	var want []int64 // timestamps of s-express's records, by seq
	appendN := func(c *client.Client, n int) {
		t.Helper()
		for _, s := range streams {
			for range n {
				next := batch[s]
				a, err := c.Append(ctx, s, []client.Record{{Body: fmt.Appendf(nil, "%d", next)}}, client.AppendOptions{Producer: &prod, BatchSeq: next})
				if err != nil || a.StartSeq != next {
					t.Fatalf("%s: append %d: %+v, %v", s, next, a, err)
				}
				batch[s]++
			}
		}
	}
	// check: the last batch again is deduplicated (its ack, no new
	// record); every record from every seq; by timestamp.
	check := func(c *client.Client, what string) {
		t.Helper()
		for _, s := range streams {
			last := batch[s] - 1
			a, err := c.Append(ctx, s, []client.Record{{Body: fmt.Appendf(nil, "%d", last)}}, client.AppendOptions{Producer: &prod, BatchSeq: last})
			if err != nil || a.StartSeq != last {
				t.Fatalf("%s: %s: the last batch again: %+v, %v, want its ack at %d (deduplicated)", what, s, a, err, last)
			}
			for from := uint64(0); from < batch[s]; from++ {
				res, err := c.Read(ctx, s, client.FromSeq(from), client.Limits{})
				if err != nil || uint64(len(res.Records)) != batch[s]-from {
					t.Fatalf("%s: %s from %d: %d records, %v; want %d", what, s, from, len(res.Records), err, batch[s]-from)
				}
				for i, r := range res.Records {
					if r.Seq != from+uint64(i) || string(r.Body) != fmt.Sprint(r.Seq) {
						t.Fatalf("%s: %s from %d: record %d is seq %d %q", what, s, from, i, r.Seq, r.Body)
					}
					if s == "s-express" && from == 0 {
						if int(r.Seq) == len(want) {
							want = append(want, r.TimestampMs)
						} else if want[r.Seq] != r.TimestampMs {
							t.Fatalf("%s: seq %d timestamp %d, was %d", what, r.Seq, r.TimestampMs, want[r.Seq])
						}
					}
				}
			}
		}
		for seq, ts := range want {
			res, err := c.Read(ctx, "s-express", client.FromTimestamp(ts), client.Limits{Count: 1})
			if err != nil || len(res.Records) != 1 || res.Records[0].TimestampMs < ts || (res.Records[0].Seq > 0 && want[res.Records[0].Seq-1] >= ts) || res.Records[0].Seq > uint64(seq) {
				t.Fatalf("%s: by timestamp %d (seq %d): %+v, %v", what, ts, seq, res.Records, err)
			}
		}
	}
	n, c := refsNode()
	for _, s := range streams {
		if _, err := c.CreateStream(ctx, s, client.CreateOptions{Class: s[2:]}); err != nil {
			t.Fatal(err)
		}
	}
	appendN(c, 12)
	check(c, "refs")
	time.Sleep(50 * time.Millisecond) // the absorb runs in-process
	n.Close()
	for _, class := range []metastore.Class{metastore.Standard, metastore.Express} {
		h, err := meta.GetHead(ctx, metastore.ChainID{Star: "star-0", Class: class})
		if err != nil || !h.Indexed.IsZero() || !h.Settled.Less(h.Checkpoint) {
			t.Fatalf("%s after the refs node: %+v, %v: want refs passes absorbed and unsettled", class, h, err)
		}
	}

	n, c = onNode()
	check(c, "switched, before its first pass")
	appendN(c, 12)
	check(c, "switched")
	waitSettled := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, class := range []metastore.Class{metastore.Standard, metastore.Express} {
			for {
				h, err := meta.GetHead(ctx, metastore.ChainID{Star: "star-0", Class: class})
				if err != nil {
					t.Fatal(err)
				}
				if !h.Indexed.IsZero() && h.Settled == h.Checkpoint && h.Trimmed == h.Settled && h.Checkpoint.Epoch == h.Epoch && h.Checkpoint.Slot > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: head %+v: not indexed, settled and trimmed", class, h)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	waitSettled()
	check(c, "switched and settled")
	n.Close()

	n, c = onNode()
	check(c, "restarted on the mixed chain")
	appendN(c, 5)
	waitSettled()
	check(c, "restarted and settled")
	n.Close()

	if n, _, err := start(false, time.Hour, 0, 0); !errors.Is(err, absorb.ErrIndexed) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("a node with the pass index off on indexed chains: %v, want ErrIndexed", err)
	}
}
