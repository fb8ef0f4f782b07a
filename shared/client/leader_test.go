package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
)

// fakeStar answers CheckTail: with a Leader detail naming leaderURL when
// it is set, else with a tail. It records the Authorization headers it saw.
type fakeStar struct {
	strandv1connect.UnimplementedStrandServiceHandler
	mu        sync.Mutex
	leaderURL string
	auths     []string
}

func (f *fakeStar) CheckTail(_ context.Context, req *connect.Request[strandv1.CheckTailRequest]) (*connect.Response[strandv1.CheckTailResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auths = append(f.auths, req.Header().Get("Authorization"))
	if f.leaderURL != "" {
		ce := connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
		d, _ := connect.NewErrorDetail(&strandv1.Leader{Star: "star-2", Url: f.leaderURL})
		ce.AddDetail(d)
		return nil, ce
	}
	return connect.NewResponse(&strandv1.CheckTailResponse{NextSeqNum: 7}), nil
}

func (f *fakeStar) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auths...)
}

func serve(t *testing.T, f *fakeStar, tls bool) *httptest.Server {
	_, h := strandv1connect.NewStrandServiceHandler(f)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	var ts *httptest.Server
	if tls {
		ts = httptest.NewTLSServer(mux)
	} else {
		ts = httptest.NewServer(mux)
	}
	t.Cleanup(ts.Close)
	return ts
}

const secret = "strand_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestLeaderOnlyToTrustedHosts: a Leader detail naming another host is not
// followed (the token never reaches it) unless that host is trusted.
func TestLeaderOnlyToTrustedHosts(t *testing.T) {
	ctx := context.Background()
	evil := &fakeStar{}
	evilTS := serve(t, evil, false)
	// Same address, another host name: 127.0.0.1 vs localhost.
	evilURL := strings.Replace(evilTS.URL, "127.0.0.1", "localhost", 1)
	entry := &fakeStar{leaderURL: evilURL}
	entryTS := serve(t, entry, false)

	c, err := New(entryTS.URL, WithToken(secret), WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.CheckTail(ctx, "s")
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("following an untrusted leader: %v, want unavailable saying the host is not trusted", err)
	}
	// Not retried: the same leader would be named again.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the untrusted leader's refusal took %v, want it at once (no retries)", d)
	}
	if got := evil.seen(); len(got) != 0 {
		t.Fatalf("the token was sent to an untrusted leader: %q", got)
	}
	if l, ok := LeaderOf(err); !ok || l.URL != evilURL {
		t.Errorf("the Leader detail is lost: %+v %v", l, ok)
	}

	trusting, err := New(entryTS.URL, WithToken(secret), WithHTTPClient(http.DefaultClient), WithTrustedLeaders("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	if tail, err := trusting.CheckTail(ctx, "s"); err != nil || tail.NextSeq != 7 {
		t.Fatalf("following a trusted leader: %v %v", tail, err)
	}
	if got := evil.seen(); len(got) != 1 {
		t.Fatalf("the trusted leader saw %d calls, want 1", len(got))
	}
}

// TestLeaderSameHostOtherPort: the endpoint's host is trusted on any port
// (stars behind one load balancer on their own listeners).
func TestLeaderSameHostOtherPort(t *testing.T) {
	leader := &fakeStar{}
	leaderTS := serve(t, leader, false)
	entryTS := serve(t, &fakeStar{leaderURL: leaderTS.URL}, false)
	c, _ := New(entryTS.URL, WithToken(secret), WithHTTPClient(http.DefaultClient))
	if _, err := c.CheckTail(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if got := leader.seen(); len(got) != 1 || got[0] != "Bearer "+secret {
		t.Fatalf("leader saw %q", got)
	}
}

// TestLeaderNoDowngrade: from an https endpoint, an http leader is never
// followed, even on the same host.
func TestLeaderNoDowngrade(t *testing.T) {
	plain := &fakeStar{}
	plainTS := serve(t, plain, false)
	entryTS := serve(t, &fakeStar{leaderURL: plainTS.URL}, true)
	c, _ := New(entryTS.URL, WithToken(secret), WithHTTPClient(entryTS.Client()), WithTrustedLeaders("127.0.0.1"))
	_, err := c.CheckTail(context.Background(), "s")
	if err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("downgrade: %v, want an error naming the scheme", err)
	}
	if got := plain.seen(); len(got) != 0 {
		t.Fatalf("the token went over plain http: %q", got)
	}
}

// TestLeaderForgottenOnFailure: a cached leader that fails is forgotten;
// the next call starts at the endpoint again. (Without retries: within
// one call's retries the entry keeps naming the dead leader.)
func TestLeaderForgottenOnFailure(t *testing.T) {
	leader := &fakeStar{}
	leaderTS := serve(t, leader, false)
	entry := &fakeStar{leaderURL: leaderTS.URL}
	entryTS := serve(t, entry, false)
	c, _ := New(entryTS.URL, WithToken(secret), WithHTTPClient(http.DefaultClient), WithRetry(Retry{MaxAttempts: 1}))
	ctx := context.Background()
	if _, err := c.CheckTail(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckTail(ctx, "s"); err != nil || len(entry.seen()) != 1 {
		t.Fatalf("the leader was not cached: %v, entry saw %d", err, len(entry.seen()))
	}
	leaderTS.Close()
	if _, err := c.CheckTail(ctx, "s"); err == nil {
		t.Fatal("a call to a closed leader succeeded")
	}
	entry.mu.Lock()
	entry.leaderURL = ""
	entry.mu.Unlock()
	if tail, err := c.CheckTail(ctx, "s"); err != nil || tail.NextSeq != 7 {
		t.Fatalf("after the leader failed: %v %v (the dead leader is still cached)", tail, err)
	}
}

// hugeStar answers every Read with a message past MaxResponseBytes.
type hugeStar struct {
	strandv1connect.UnimplementedStrandServiceHandler
}

func (hugeStar) Read(context.Context, *connect.Request[strandv1.ReadRequest]) (*connect.Response[strandv1.ReadResponse], error) {
	return connect.NewResponse(&strandv1.ReadResponse{Records: []*strandv1.SequencedRecord{{Body: make([]byte, MaxResponseBytes+1)}}}), nil
}

// TestResponseBounded: a hostile server's oversized response is refused
// with ResourceExhausted, not read into memory.
func TestResponseBounded(t *testing.T) {
	_, h := strandv1connect.NewStrandServiceHandler(hugeStar{})
	ts := httptest.NewServer(h)
	defer ts.Close()
	c, _ := New(ts.URL, WithHTTPClient(http.DefaultClient))
	if _, err := c.Read(context.Background(), "s", FromSeq(0), Limits{}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("an oversized response: %v, want resource_exhausted", err)
	}
}
