package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

func TestParsePeers(t *testing.T) {
	p, err := ParsePeers(" star-1=http://a:4780, star-2=http://b:4780 ,")
	if err != nil || len(p) != 2 || p["star-1"] != "http://a:4780" || p["star-2"] != "http://b:4780" {
		t.Fatalf("peers %v %v", p, err)
	}
	for _, bad := range []string{"star-1", "=http://x", "star-1="} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}

// indexModes are the ways a node's restart recovers its streams: from refs,
// on the pass index with settle running into runs and nothing flushed
// (from the runs and passes), with every step flushing every stream (refs
// made by SettleRef, markers in the runs), and with nothing settled (from
// the passes).
var indexModes = []struct {
	name       string
	passIndex  bool
	settle     time.Duration
	flushBytes int64
	fanout     int // settle's Fanout (design 014, level 2); 0: its default
}{
	{"refs", false, 20 * time.Millisecond, 0, 0},
	{"pass-index-runs", true, 20 * time.Millisecond, 0, 0},
	{"pass-index-merged", true, 20 * time.Millisecond, 0, 1}, // every run merged
	{"pass-index-flushed", true, 20 * time.Millisecond, 1, 0},
	{"pass-index-unsettled", true, time.Hour, 0, 0},
}

// TestStartServesAndRestarts starts a node on memory stores, appends
// through the API to both classes, stops it, and starts a second node over
// the same stores: it takes over (epoch 2), serves every acked record, and
// appends continue at the recovered tail.
func TestStartServesAndRestarts(t *testing.T) {
	for _, tc := range indexModes {
		t.Run(tc.name, func(t *testing.T) { startServesAndRestarts(t, tc.passIndex, tc.settle, tc.flushBytes, tc.fanout) })
	}
}

func startServesAndRestarts(t *testing.T, passIndex bool, settleEvery time.Duration, flushBytes int64, fanout int) {
	ctx := context.Background()
	meta := metastore.NewMem()
	start := nodeStarter(t, meta, passIndex, settleEvery, flushBytes, fanout)
	n, c := start()
	for _, class := range []string{"standard", "express"} {
		if _, err := c.CreateStream(ctx, "s-"+class, client.CreateOptions{Class: class}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			if _, err := c.Append(ctx, "s-"+class, []client.Record{{Body: []byte(fmt.Sprint(i))}}, client.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // absorb, settle and trim run in-process
	for path, want := range map[string][]string{
		"/healthz": {"ok"},
		"/metrics": {`strand_appends_total{class="express"} 20`, `strand_appends_total{class="standard"} 20`, "strand_ack_seconds_bucket",
			"strand_put_seconds_bucket", "strand_pool_bytes", `strand_pool_tenants{class="express"} 0`, `strand_pool_waiting_tenants{class="express"} 0`, "strand_window_slots", "strand_backlog_flights", "strand_backlog_age_seconds",
			`strand_backlog_stalls_total{cause="metastore_slow",class="express"} 0`},
	} {
		resp, err := http.Get(n.AdminURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range want {
			if resp.StatusCode != 200 || !strings.Contains(string(body), w) {
				t.Fatalf("GET %s: %d, missing %q in\n%s", path, resp.StatusCode, w, body)
			}
		}
		// The window cache's figures, with the pass index only.
		if path == "/metrics" {
			for _, w := range []string{"strand_window_cache_bytes ", "strand_window_cache_objects ", "# TYPE strand_window_cache_gets_total counter",
				"strand_window_cache_evictions_total ", fmt.Sprintf("strand_window_cache_budget_bytes %g", float64(DefaultWindowCacheMiB<<20))} {
				if strings.Contains(string(body), w) != passIndex {
					t.Fatalf("GET /metrics, pass index %v: %q present %v in\n%s", passIndex, w, !passIndex, body)
				}
			}
		}
	}
	n.Close()
	if passIndex && (settleEvery > time.Second || flushBytes == 0) {
		for _, class := range []string{"standard", "express"} {
			st, err := meta.GetStream(ctx, "s-"+class)
			if err != nil {
				t.Fatal(err)
			}
			if refs, err := meta.QueryRefs(ctx, st.ID, 0, 10); err != nil || len(refs) != 0 {
				t.Fatalf("%s: refs %v, %v: want none (all in the window: runs and passes)", class, refs, err)
			}
		}
		if settleEvery < time.Second {
			// Settled into runs: the successor recovers tails from them.
			h, err := meta.GetHead(ctx, metastore.ChainID{Star: "star-0", Class: metastore.Express})
			if err != nil || h.Settled == h.Flushed {
				t.Fatalf("express head %+v, %v: want runs in [flushed, settled)", h, err)
			}
			if fanout == 1 && h.Merged.IsZero() {
				t.Fatalf("express head %+v: want merged runs", h)
			}
		}
	}

	n, c = start()
	defer n.Close()
	head, err := meta.GetHead(ctx, metastore.ChainID{Star: "star-0", Class: metastore.Express})
	if err != nil || head.Epoch != 2 {
		t.Fatalf("after restart the Express chain is at epoch %d (%v), want 2", head.Epoch, err)
	}
	for _, class := range []string{"standard", "express"} {
		a, err := c.Append(ctx, "s-"+class, []client.Record{{Body: []byte("20")}}, client.AppendOptions{})
		if err != nil || a.StartSeq != 20 {
			t.Fatalf("%s: append after restart: %+v %v", class, a, err)
		}
		res, err := c.Read(ctx, "s-"+class, client.FromSeq(0), client.Limits{})
		if err != nil || len(res.Records) != 21 {
			t.Fatalf("%s: read %d records (%v), want 21", class, len(res.Records), err)
		}
		for i, r := range res.Records {
			if r.Seq != uint64(i) || string(r.Body) != fmt.Sprint(i) {
				t.Fatalf("%s: record %d = seq %d %q", class, i, r.Seq, r.Body)
			}
		}
	}
}

// nodeStarter returns a function that starts a node (in-memory buckets
// and metastore shared by every start, so a second start is a takeover of
// the first) and a client of it.
func nodeStarter(t *testing.T, meta metastore.Store, passIndex bool, settleEvery time.Duration, flushBytes int64, fanout int) func() (*Node, *client.Client) {
	start := modeStarter(t, meta)
	return func() (*Node, *client.Client) {
		n, c, err := start(passIndex, settleEvery, flushBytes, fanout)
		if err != nil {
			t.Fatal(err)
		}
		return n, c
	}
}

// modeStarter is nodeStarter with the mode chosen at each start (a chain
// switched between two processes).
func modeStarter(t *testing.T, meta metastore.Store) func(passIndex bool, settleEvery time.Duration, flushBytes int64, fanout int) (*Node, *client.Client, error) {
	var exp []objstore.Bucket
	for i := 0; i < 3; i++ {
		exp = append(exp, objstore.NewMem(fmt.Sprintf("x%d", i)))
	}
	std := []objstore.Bucket{objstore.NewMem("s0")}
	settled := objstore.NewMem("settled")
	return func(passIndex bool, settleEvery time.Duration, flushBytes int64, fanout int) (*Node, *client.Client, error) {
		cfg := star.Defaults()
		cfg.Express.Buckets, cfg.Standard.Buckets = exp, std
		cfg.Standard.FlushDeadline = time.Millisecond
		n, err := Start(context.Background(), Config{Star: cfg, Meta: meta, Settled: settled, Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", NoAuth: true,
			SettleEvery: settleEvery, TrimEvery: 30 * time.Millisecond, NoPassIndex: !passIndex, FlushBytes: flushBytes, Fanout: fanout})
		if err != nil {
			return nil, nil, err
		}
		c, err := client.New(n.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		return n, c, nil
	}
}

// TestCommandsSurviveTakeover: a stream fenced and trimmed on one node
// keeps its fencing token and trim point on the next (a takeover
// recovering the stream from durable artifacts alone): an append without
// the token is refused, one with it lands at the tail, and a read from 0
// starts at the trim point. On refs, on the pass index with settle
// running (settle's SettleRef keeps the state) and with nothing settled
// (the successor recovers from the window). Regression test: with the
// pass index on, the successor accepted the append without the token
// before the pass index carried the command state.
func TestCommandsSurviveTakeover(t *testing.T) {
	for _, tc := range indexModes {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			meta := metastore.NewMem()
			start := nodeStarter(t, meta, tc.passIndex, tc.settle, tc.flushBytes, tc.fanout)
			n, c := start()
			if _, err := c.CreateStream(ctx, "f", client.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 5; i++ {
				if _, err := c.Append(ctx, "f", []client.Record{{Body: []byte(fmt.Sprint(i))}}, client.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Fence(ctx, "f", "writer-2", client.FenceOptions{}); err != nil { // seq 5
				t.Fatal(err)
			}
			if _, err := c.Trim(ctx, "f", 2, client.TrimOptions{FenceToken: "writer-2"}); err != nil { // seq 6
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // absorb (and settle) run in-process
			n.Close()

			n, c = start()
			defer n.Close()
			if a, err := c.Append(ctx, "f", []client.Record{{Body: []byte("deposed")}}, client.AppendOptions{}); err == nil {
				t.Fatalf("append without the fencing token after takeover accepted at seq %d", a.StartSeq)
			} else if !strings.Contains(err.Error(), "fencing token mismatch") {
				t.Fatalf("append without the token: %v, want a fencing token mismatch", err)
			}
			a, err := c.Append(ctx, "f", []client.Record{{Body: []byte("7")}}, client.AppendOptions{FenceToken: "writer-2"})
			if err != nil || a.StartSeq != 7 {
				t.Fatalf("append with the token after takeover: %+v %v, want seq 7", a, err)
			}
			res, err := c.Read(ctx, "f", client.FromSeq(0), client.Limits{})
			if err != nil || len(res.Records) == 0 || res.Records[0].Seq != 2 || res.Records[len(res.Records)-1].Seq != 7 {
				t.Fatalf("read from 0 after takeover: %v, %d records; want seqs 2-7 (trimmed below 2)", err, len(res.Records))
			}
		})
	}
}

func FuzzParsePeers(f *testing.F) {
	f.Add("star-1=http://a:4780,star-2=https://b:4781")
	f.Add("=,=x")
	f.Fuzz(func(t *testing.T, s string) {
		peers, err := ParsePeers(s)
		if err != nil {
			return
		}
		for id, u := range peers {
			if id == "" || u == "" {
				t.Fatalf("ParsePeers(%q) accepted an empty id or URL", s)
			}
		}
	})
}

// TestAdminFallback: an admin address taken at bind time moves to
// AdminFallback when one is set (strand dev's default address: two
// processes starting at once both found it free, and one failed to start
// before the fallback), and fails the start when none is.
func TestAdminFallback(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	start := func(fallback string) (*Node, error) {
		cfg := star.Defaults()
		cfg.Express.Buckets = []objstore.Bucket{objstore.NewMem("x0"), objstore.NewMem("x1"), objstore.NewMem("x2")}
		cfg.Standard.Buckets = []objstore.Bucket{objstore.NewMem("s0")}
		return Start(context.Background(), Config{Star: cfg, Meta: metastore.NewMem(), Settled: objstore.NewMem("settled"), Addr: "127.0.0.1:0",
			AdminAddr: taken.Addr().String(), AdminFallback: fallback, NoAuth: true})
	}
	if n, err := start(""); err == nil {
		n.Close()
		t.Fatal("a taken admin address without a fallback started")
	}
	n, err := start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("with a fallback: %v", err)
	}
	defer n.Close()
	if u := n.AdminURL(); u == "" || strings.Contains(u, taken.Addr().String()) {
		t.Fatalf("admin URL %q, want the fallback's", u)
	}
}

// TestKafkaBindWaitsForTheLeader: a Kafka address in use when the node
// starts (a standby taking over from a leader that just died, whose socket
// the kernel has yet to release) is bound once it frees, within
// KafkaConfig.BindWait; without a wait the start fails at once, and an
// optional address still taken after the wait leaves the node serving
// without Kafka. Failed before BindWait: the first case did not start.
func TestKafkaBindWaitsForTheLeader(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	start := func(kc KafkaConfig) (*Node, error) {
		cfg := star.Defaults()
		cfg.Express.Buckets = []objstore.Bucket{objstore.NewMem("x0"), objstore.NewMem("x1"), objstore.NewMem("x2")}
		cfg.Standard.Buckets = []objstore.Bucket{objstore.NewMem("s0")}
		return Start(context.Background(), Config{Star: cfg, Meta: metastore.NewMem(), Settled: objstore.NewMem("settled"), Addr: "127.0.0.1:0", NoAuth: true, Kafka: kc})
	}
	if n, err := start(KafkaConfig{Addr: addr}); err == nil {
		n.Close()
		t.Fatal("a taken Kafka address without a wait started")
	}
	began := time.Now()
	n, err := start(KafkaConfig{Addr: addr, Optional: true, BindWait: 150 * time.Millisecond})
	if err != nil {
		t.Fatalf("optional, taken throughout the wait: %v", err)
	}
	n.Close()
	if got, took := n.KafkaAddr(), time.Since(began); got != "" || took < 150*time.Millisecond {
		t.Fatalf("optional, taken throughout the wait: Kafka on %q after %s, want none after the 150ms wait", got, took)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		taken.Close()
	}()
	n, err = start(KafkaConfig{Addr: addr, BindWait: 10 * time.Second})
	if err != nil {
		t.Fatalf("freed within the wait: %v", err)
	}
	defer n.Close()
	if got := n.KafkaAddr(); got != addr {
		t.Fatalf("freed within the wait: Kafka on %q, want %s", got, addr)
	}
}
