package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serving is a star process that leads: what Task.Lead starts.
type Serving interface {
	// Admin serves the process's /metrics and /healthz.
	Admin() http.Handler
	// Wait blocks until ctx ends (nil) or the process fails.
	Wait(ctx context.Context) error
	// Close drains and stops the process.
	Close()
}

// Task is one task of a star in standby mode (ADR 0051): it contends for
// the lease, relays its API port to the leader while it stands by, and
// once it holds the lease starts the star (fence, walk, mint) on that
// port. On its context's end (SIGTERM) a leader drains and then releases
// the lease, so the standby takes over at its next read.
//
// Its admin address serves:
//
//	/healthz  200 while the task is ready: standing by with a leader to
//	          relay to, or leading with a healthy star; 503 otherwise.
//	          What the load balancer and ECS check.
//	/leader   200 only while the task leads; 503 otherwise. For
//	          operators and tests: the load balancer must not use it
//	          (ECS stops tasks that fail the target group's check).
//	/metrics  the star's metrics while it leads.
type Task struct {
	Runner    *Runner
	Addr      string // the API listen address
	AdminAddr string // "" for none
	// Relay lists more listen addresses (the Kafka front end's) that the
	// standby relays, while it stands by, to the same port on the
	// leader's host; the leader serves them itself. So a load balancer
	// whose health check on such a port reaches both tasks (ECS replaces
	// a task that fails any of its target groups' checks) routes through
	// either to the leader.
	Relay []string
	// Lead starts the star once the lease is held (its API on Addr, its
	// admin handler served here).
	Lead func(ctx context.Context) (Serving, error)
	Log  *slog.Logger

	mu      sync.Mutex
	serving Serving
	state   string // standby, leader, stopping
}

// ErrStopped: the task stopped before it could lead.
var ErrStopped = errors.New("lease: stopped while standing by")

func (t *Task) set(state string, sv Serving) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state, t.serving = state, sv
}

func (t *Task) get() (string, Serving) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state, t.serving
}

// leaderAddr is where a standby relays to: the lease holder's address,
// "" while no other task is known to hold it.
// leaderPort is the leader's address at listen address addr's port: what
// a relay of that port dials.
func (t *Task) leaderPort(addr string) func() string {
	_, port, _ := net.SplitHostPort(addr)
	return func() string {
		a := t.leaderAddr()
		if a == "" {
			return ""
		}
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return ""
		}
		return net.JoinHostPort(host, port)
	}
}

// forwarders close together.
type forwarders []*Forwarder

func (fs forwarders) Close() { closeAll(fs) }

func closeAll(fs []*Forwarder) {
	for _, f := range fs {
		f.Close()
	}
}

func (t *Task) leaderAddr() string {
	h := t.Runner.Holder()
	if h.Holder == t.Runner.core.cfg.Holder || h.Addr == "" {
		return ""
	}
	return h.Addr
}

// Handler is the task's admin handler (see Task).
func (t *Task) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		state, sv := t.get()
		switch {
		case state == "standby" && t.leaderAddr() == "":
			// Nothing to relay to yet: connections would be closed.
			http.Error(w, "standby: no leader known yet", http.StatusServiceUnavailable)
		case state == "standby":
			h := t.Runner.Holder()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintf(w, "ok\nstandby: leader %q at %q (lease v%d)\n", h.Holder, h.Addr, h.Version)
		case state == "leader" && sv != nil:
			sv.Admin().ServeHTTP(w, r)
		default:
			http.Error(w, state, http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/leader", func(w http.ResponseWriter, r *http.Request) {
		state, sv := t.get()
		if state != "leader" || sv == nil || !t.Runner.Leading() {
			http.Error(w, "not the leader: "+state, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "leader")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if state, sv := t.get(); state == "leader" && sv != nil {
			sv.Admin().ServeHTTP(w, r)
			return
		}
		http.Error(w, "no metrics while standing by", http.StatusServiceUnavailable)
	})
	return mux
}

// Run runs the task until ctx ends (nil: a leader drained and released
// the lease, or a standby stopped), the lease is lost (ErrDeposed: the
// process must exit, and a new one stands by), or the star fails.
func (t *Task) Run(ctx context.Context) error {
	log := t.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t.set("standby", nil)
	if t.AdminAddr != "" {
		aln, err := net.Listen("tcp", t.AdminAddr)
		if err != nil {
			return fmt.Errorf("lease: listen on the admin address %s: %w", t.AdminAddr, err)
		}
		admin := &http.Server{Handler: t.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = admin.Serve(aln) }()
		defer admin.Close()
	}
	ln, err := net.Listen("tcp", t.Addr)
	if err != nil {
		return fmt.Errorf("lease: listen on %s: %w", t.Addr, err)
	}
	fwds := []*Forwarder{NewForwarder(ln, t.leaderAddr, 0, log)}
	for _, addr := range t.Relay {
		rln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll(fwds)
			return fmt.Errorf("lease: listen on %s: %w", addr, err)
		}
		fwds = append(fwds, NewForwarder(rln, t.leaderPort(addr), 0, log))
	}
	for _, f := range fwds {
		go func() { _ = f.Serve() }()
	}
	fwd := forwarders(fwds)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- t.Runner.Run(runCtx) }()
	log.Info("standing by", "addr", t.Addr)
	select {
	case <-ctx.Done():
		fwd.Close()
		t.Runner.Release()
		<-runErr
		return nil
	case err := <-runErr:
		fwd.Close()
		return fmt.Errorf("%w: %w", ErrStopped, err)
	case <-t.Runner.Led():
	}
	fwd.Close() // frees the port and drops relayed connections: clients reconnect
	log.Info("leading: starting the star", "addr", t.Addr)
	sv, err := t.Lead(ctx)
	if err != nil {
		t.set("stopping", nil)
		t.Runner.Release() // let another task try
		<-runErr
		return err
	}
	t.set("leader", sv)
	waitErr := make(chan error, 1)
	go func() { waitErr <- sv.Wait(ctx) }()
	select {
	case <-ctx.Done():
		// The handover: drain, then release, so the standby mints after
		// the last flight of this one.
		t.set("stopping", nil)
		sv.Close()
		t.Runner.Release()
		if err := <-runErr; err != nil {
			log.Warn("lease not released; the standby takes it when it lapses", "err", err.Error())
		}
		return nil
	case err := <-runErr:
		t.set("stopping", nil)
		sv.Close()
		return err
	case err := <-waitErr:
		t.set("stopping", nil)
		sv.Close()
		t.Runner.Release()
		<-runErr
		return err
	}
}
