package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// fakeStar serves "star NAME" on the API address, as a star that leads.
type fakeStar struct {
	name   string
	srv    *http.Server
	closed atomic.Bool
}

func (f *fakeStar) Admin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok\nstar "+f.name) })
}
func (f *fakeStar) Wait(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeStar) Close()                         { f.closed.Store(true); f.srv.Close() }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type testTask struct {
	*Task
	api, admin string
	star       atomic.Pointer[fakeStar]
	errc       chan error
	stop       context.CancelFunc
}

func startTask(t *testing.T, store metastore.Leases, name string, relay ...string) *testTask {
	t.Helper()
	tt := &testTask{api: freeAddr(t), admin: freeAddr(t), errc: make(chan error, 1)}
	r, err := NewRunner(Config{Star: "star-1", Holder: ID(name), Addr: tt.api, TTL: 300 * time.Millisecond}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tt.Task = &Task{Runner: r, Addr: tt.api, AdminAddr: tt.admin, Relay: relay, Lead: func(ctx context.Context) (Serving, error) {
		ln, err := net.Listen("tcp", tt.api)
		if err != nil {
			return nil, err
		}
		f := &fakeStar{name: name}
		f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "star "+name) })}
		go f.srv.Serve(ln)
		tt.star.Store(f)
		return f, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	tt.stop = cancel
	go func() { tt.errc <- tt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-tt.errc })
	return tt
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("not within 5 s: %s", what)
}

// TestTaskStandbyRelaysAndTakesOverOnHandover: of two tasks of a star,
// one leads; the other is ready (/healthz 200) but not the leader
// (/leader 503) and relays its API port to the leader. When the leader
// is stopped (SIGTERM) it drains, releases, and the standby leads on its
// own port.
func TestTaskStandbyRelaysAndTakesOverOnHandover(t *testing.T) {
	store := metastore.NewMem()
	a := startTask(t, store, "a")
	eventually(t, "a leads", func() bool { c, _ := get(t, "http://"+a.admin+"/leader"); return c == 200 })
	b := startTask(t, store, "b")
	eventually(t, "b stands by, following a", func() bool {
		c, body := get(t, "http://"+b.admin+"/healthz")
		return c == 200 && strings.Contains(body, "standby") && strings.Contains(body, a.api)
	})
	if c, _ := get(t, "http://"+b.admin+"/leader"); c != http.StatusServiceUnavailable {
		t.Fatalf("standby /leader: %d, want 503", c)
	}
	if c, body := get(t, "http://"+b.api+"/"); c != 200 || body != "star a" {
		t.Fatalf("the standby's API port: %d %q, want the leader's answer", c, body)
	}
	if c, body := get(t, "http://"+a.admin+"/healthz"); c != 200 || !strings.Contains(body, "star a") {
		t.Fatalf("leader /healthz: %d %q, want the star's health", c, body)
	}
	stopped := time.Now()
	a.stop()
	if err := <-a.errc; err != nil {
		t.Fatalf("the leader's handover: %v", err)
	}
	a.errc <- nil // for the cleanup
	if !a.star.Load().closed.Load() {
		t.Fatal("the leader released without draining its star")
	}
	eventually(t, "b leads", func() bool { c, _ := get(t, "http://"+b.admin+"/leader"); return c == 200 })
	if took := time.Since(stopped); took > time.Second {
		t.Fatalf("handover took %s, want a poll or so (TTL 300 ms)", took)
	}
	if c, body := get(t, "http://"+b.api+"/"); c != 200 || body != "star b" {
		t.Fatalf("the new leader's API port: %d %q, want its own answer", c, body)
	}
}

// TestTaskNotReadyWithoutALeader: a standby that knows no leader (the
// lease is held by nobody it can reach) is not ready: /healthz 503, so the
// load balancer sends it nothing it would have to close. Regression: it
// said 200 before its first read, and a client's call through it was
// reset.
func TestTaskNotReadyWithoutALeader(t *testing.T) {
	store := metastore.NewMem()
	// A released lease that nobody holds, and a standby that cannot take
	// it: its store refuses writes.
	if _, err := store.PutLease(context.Background(), metastore.Lease{Star: "star-1", Version: 1, TTLMs: 300}); err != nil {
		t.Fatal(err)
	}
	b := startTask(t, readOnly{store}, "b")
	time.Sleep(100 * time.Millisecond) // several reads
	if c, body := get(t, "http://"+b.admin+"/healthz"); c != http.StatusServiceUnavailable {
		t.Fatalf("standby without a leader: /healthz %d %q, want 503", c, body)
	}
}

// readOnly is a lease store whose writes fail as unavailable.
type readOnly struct{ metastore.Leases }

func (readOnly) PutLease(context.Context, metastore.Lease) (metastore.Lease, error) {
	return metastore.Lease{}, fmt.Errorf("read only: %w", metastore.ErrUnavailable)
}

// TestTaskStoppedWhileStandingBy: a standby stopped returns nil and frees
// its ports.
func TestTaskStoppedWhileStandingBy(t *testing.T) {
	store := metastore.NewMem()
	a := startTask(t, store, "a")
	eventually(t, "a leads", func() bool { c, _ := get(t, "http://"+a.admin+"/leader"); return c == 200 })
	b := startTask(t, store, "b")
	eventually(t, "b stands by", func() bool { c, _ := get(t, "http://"+b.admin+"/healthz"); return c == 200 })
	b.stop()
	if err := <-b.errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped standby: %v", err)
	}
	b.errc <- nil
	ln, err := net.Listen("tcp", b.api)
	if err != nil {
		t.Fatalf("the standby's API port is still held: %v", err)
	}
	ln.Close()
}

// TestTaskStandbyRelaysKafka: a standby relays each Relay port (the Kafka
// front end's) to the same port on the leader's host, so a load balancer
// health check on that port passes on both tasks (ECS would replace a
// standby that failed it) and a client through either reaches the
// leader. Two loopback addresses stand for the two tasks' hosts.
func TestTaskStandbyRelaysKafka(t *testing.T) {
	kafka, err := net.Listen("tcp", "127.0.0.1:0") // the leader's Kafka front end
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	go func() {
		for {
			c, err := kafka.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "kafka a")
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(kafka.Addr().String())
	store := metastore.NewMem()
	a := startTask(t, store, "a")
	eventually(t, "a leads", func() bool { c, _ := get(t, "http://"+a.admin+"/leader"); return c == 200 })
	relay := net.JoinHostPort("127.0.0.2", port)
	startTask(t, store, "b", relay)
	eventually(t, "the standby's Kafka port reaches the leader's", func() bool {
		c, err := net.DialTimeout("tcp", relay, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		return string(b) == "kafka a"
	})
}
