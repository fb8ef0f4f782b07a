package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/kafka"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/probe"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/shared/wake"
)

// Remote is the AWS settlement wiring: queues the Lambdas consume.
type Remote struct {
	SQS *sqs.Client
	// ReleaseQueueURL: the absorb's FIFO queue ("" publishes nothing; the
	// absorb's scheduled sweep still runs).
	ReleaseQueueURL string
	// FenceQueueURL: the probe's queue ("" publishes nothing; the probe's
	// scheduled sweep still runs).
	FenceQueueURL string
	// PollEvery: how often the star reads its chain heads (0: 1 s).
	PollEvery time.Duration
}

// DefaultWindowCacheMiB is Config.WindowCacheMiB's default: the level-1
// and merged runs of about 30,000 streams' 1 h window (about 144 B per
// entry per live run), and what the star task's memory plan counts
// (infra/stack/config.go).
const DefaultWindowCacheMiB = 256

// DefaultReadAheadMiB is the read sessions' shared read-ahead budget.
const DefaultReadAheadMiB = read.DefaultAheadBudget >> 20

// Config is one star process.
type Config struct {
	Star    star.Config // buckets opened by the caller
	Meta    metastore.Store
	Settled objstore.Bucket

	Addr      string // API listen address, e.g. 127.0.0.1:4780
	AdminAddr string // metrics and health ("": none)
	// AdminFallback is listened on when AdminAddr cannot be bound (""):
	// fail). strand dev's default admin address falls back to a free
	// loopback port, decided at bind time so that two processes starting
	// at once cannot both take the default.
	AdminFallback string
	TLSCert       string // both or neither: serve the API over TLS
	TLSKey        string
	Peers         map[string]string // star id -> API base URL
	// NoAuth disables bearer tokens (tests only).
	NoAuth bool
	// Limits bound each request (zero: server's defaults); MaxConns the
	// API's open connections (0: server.DefaultMaxConns).
	Limits   server.Limits
	MaxConns int
	// SourceRate and GlobalRate limit metastore lookups of tokens not
	// known valid, per source address and in all (zero: auth's defaults).
	// BindLimitFlags binds these and the two above to flags.
	SourceRate, GlobalRate auth.Rate

	// NoPassIndex keeps the star's chains in refs mode (one ref per
	// stream per absorb pass; --pass-index=false). By default absorb
	// passes are indexed in the settled bucket (design 014): absorb,
	// settle, trim, the probe, reads and tail recovery all use the pass
	// index, and a chain that ran in refs mode switches at its next
	// absorb pass ("Switching a live chain"). With Remote, the Lambdas
	// must agree (STRAND_PASS_INDEX). A chain once indexed does not go
	// back: Start refuses it with NoPassIndex (absorb.ErrIndexed).
	NoPassIndex bool
	// WindowCacheMiB bounds the decoded pass indexes, runs and merged
	// runs the node caches (passindex.Window.MaxBytes; 0:
	// DefaultWindowCacheMiB), one cache for reads, tail recovery and
	// in-process settle, trim and probe. A read or recovery visits the
	// window one object at a time; a window larger than the budget is
	// refetched in part by GET on each walk (design 014, "Window memory
	// bound").
	WindowCacheMiB int
	// FlushBytes and FlushAge tune the pass index's flush (design 014,
	// level 1; settle.Settler): 0 takes settle's defaults (4 MiB, 1 h: settle.DefaultFlushAge).
	// In-process settlement only.
	FlushBytes int64
	FlushAge   time.Duration
	// Fanout is how many level-1 runs settle merges into one (design
	// 014, level 2; settle.Settler.Fanout): 0 takes settle's default.
	// In-process settlement only.
	Fanout int
	// Remote selects AWS settlement; nil runs settlement in-process.
	Remote *Remote
	// In-process timers (0: defaults 2 s, 5 s, 30 s; settle every
	// DefaultPassIndexSettleEvery with the pass index).
	SettleEvery, TrimEvery, ProbeEvery time.Duration
	// DrainBudget bounds a graceful Close (0: DefaultDrainBudget; see
	// drain.go).
	DrainBudget time.Duration
	// ReadAheadMiB bounds the read-ahead of all read sessions together
	// (0: DefaultReadAheadMiB); the segment cache they share
	// (read.SegmentCache) holds a quarter of it beside.
	ReadAheadMiB int
	// Kafka is the Kafka front end (kafka.go; zero: none).
	Kafka KafkaConfig

	Logger *slog.Logger
}

// DefaultPassIndexSettleEvery is the in-process settle period with the
// pass index: a settle step writes one run (design 014, level 1), merged
// by settle.DefaultFanout (an hour of them) into one (level 2), live
// until flushed (settle.DefaultFlushAge): with both defaults at most 60
// runs in a window's cache and a read's search.
const DefaultPassIndexSettleEvery = time.Minute

// Node is a running star process.
type Node struct {
	Star     *star.Star
	endpoint string
	adminURL string
	log      *slog.Logger
	api      *http.Server
	admin    *http.Server
	srv      *server.Server
	budget   time.Duration
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errc     chan error

	kafka     *kafka.Server // the Kafka front end (nil: none)
	kafkaAddr string
}

// Sets returns the chain bucket sets of the star's classes.
func Sets(cfg star.Config) absorb.Sets {
	return absorb.Sets{
		Standard: chain.Set{Buckets: cfg.Standard.Buckets, W: cfg.Standard.W},
		Express:  chain.Set{Buckets: cfg.Express.Buckets, W: cfg.Express.W},
	}
}

// Start builds and starts the process: the star takes its chains (minting
// or taking over), settlement starts, and the API listens.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Star.Logger = log
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("node: give both a TLS certificate and key, or neither")
	}
	if err := cfg.CheckLimits(); err != nil {
		return nil, err
	}
	sets := Sets(cfg.Star)
	abs := &absorb.Absorber{Meta: cfg.Meta, Sets: sets, Log: log}
	var window *passindex.Window
	passIndex := !cfg.NoPassIndex
	if passIndex {
		if cfg.Settled == nil {
			return nil, errors.New("node: the pass index needs the settled bucket")
		}
		abs.Index = cfg.Settled
		mib := cfg.WindowCacheMiB
		if mib <= 0 {
			mib = DefaultWindowCacheMiB
		}
		window = &passindex.Window{Meta: cfg.Meta, Bucket: cfg.Settled, Parallel: passindex.DefaultColdLoadParallel, MaxBytes: int64(mib) << 20}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n := &Node{log: log, cancel: cancel, errc: make(chan error, 2), budget: cfg.DrainBudget}
	kln, err := n.listenKafka(cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(err error) (*Node, error) {
		if kln != nil {
			kln.Close()
		}
		cancel()
		n.wg.Wait()
		return nil, err
	}

	opt := star.Options{
		Absorber: abs,
		NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W}
		},
	}
	var local *wake.Local
	var poller *wake.Poller
	var releases *wake.SQS // counts stalled sends in the star's registry
	probeSets := map[metastore.ChainID]chain.Set{}
	prober := &probe.Handler{Sets: probeSets, Meta: cfg.Meta, Settled: cfg.Settled, Log: log, PassIndex: passIndex, Window: window}
	if cfg.Remote == nil {
		local = wake.NewLocal(abs, cfg.Star.Clock, log)
		opt.Waker = local
		opt.OnFenced = func(c metastore.ChainID, epoch, cut uint64, window int) {
			ev := probe.FenceEvent{Star: c.Star, Class: c.Class.String(), Epoch: epoch, Cut: cut, Window: window}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				if _, err := prober.Probe(runCtx, ev); err != nil && runCtx.Err() == nil {
					log.Warn("garbage probe after fence failed; the sweep retries", "chain", c.String(), "err", err.Error())
				}
			}()
		}
	} else {
		if cfg.Remote.ReleaseQueueURL != "" {
			releases = &wake.SQS{Client: cfg.Remote.SQS, QueueURL: cfg.Remote.ReleaseQueueURL, Log: log}
			opt.Waker = releases
		}
		if u := cfg.Remote.FenceQueueURL; u != "" {
			opt.OnFenced = func(c metastore.ChainID, epoch, cut uint64, window int) {
				body := fmt.Sprintf(`{"star":%q,"class":%q,"epoch":%d,"cut":%d,"window":%d}`, c.Star, c.Class, epoch, cut, window)
				if _, err := cfg.Remote.SQS.SendMessage(context.WithoutCancel(ctx), &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String(body)}); err != nil {
					log.Warn("fence event not sent; the probe's sweep covers it", "chain", c.String(), "err", err.Error())
				}
			}
		}
	}
	st, err := star.New(cfg.Star, cfg.Meta, opt)
	if err != nil {
		return fail(err)
	}
	n.Star = st
	if releases != nil {
		releases.Metrics = st.Metrics()
	}
	if window != nil {
		window.Register(st.Metrics())
	}
	if err := st.Metrics().RegisterRuntime(); err != nil { // go_* and process_* on /metrics
		return fail(err)
	}
	for _, c := range st.Chains() {
		set, err := sets.For(c)
		if err != nil {
			return fail(err)
		}
		probeSets[c] = set
		if !passIndex {
			// A chain indexed since does not go back to refs: this star
			// would neither absorb nor read it (design 014).
			h, err := cfg.Meta.GetHead(ctx, c)
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				return fail(fmt.Errorf("node: head of chain %s: %w", c, err))
			}
			if !h.Indexed.IsZero() {
				return fail(fmt.Errorf("node: %w", absorb.IndexedErr("start", c, h.Indexed)))
			}
		}
	}
	if local != nil {
		local.SetObserver(st)
		st.SetAbsorbHealth(local.Health)
	} else {
		poller = &wake.Poller{Meta: cfg.Meta, Chains: st.Chains(), Observer: st, Clock: cfg.Star.Clock, Every: cfg.Remote.PollEvery, Log: log}
		st.SetAbsorbHealth(poller.Health)
	}
	if err := st.Start(ctx); err != nil {
		return fail(fmt.Errorf("start the star: %w", err))
	}
	if local != nil {
		n.goRun(func() { local.Run(runCtx, 5*time.Second) })
		n.settlement(runCtx, cfg, passIndex, sets, prober, st.Chains(), window)
		// Absorb whatever a predecessor left released but unabsorbed.
		for _, c := range st.Chains() {
			_ = local.Released(runCtx, c, st.Released(c))
		}
	} else {
		n.goRun(func() { poller.Run(runCtx) })
	}

	rd := &read.Reader{Star: st, Meta: cfg.Meta, Settled: cfg.Settled, Clock: cfg.Star.Clock,
		Sets: map[metastore.Class]chain.Set{metastore.Standard: sets.Standard, metastore.Express: sets.Express}}
	if cfg.ReadAheadMiB > 0 {
		rd.AheadBudget = read.NewBudget(int64(cfg.ReadAheadMiB) << 20)
		// The shared segment cache is beside the budget, a quarter of it.
		rd.Cache = read.NewSegmentCache(int64(cfg.ReadAheadMiB) << 20 / 4)
	}
	rd.Register(st.Metrics())
	sc := server.Config{Star: st, Meta: cfg.Meta, Reader: rd, Peers: cfg.Peers, Logger: log, Clock: cfg.Star.Clock, Limits: cfg.Limits}
	if window != nil {
		rd.Transit, sc.Window = window, window
	}
	if !cfg.NoAuth {
		sc.Auth = &auth.Checker{Meta: cfg.Meta, SourceRate: cfg.SourceRate, GlobalRate: cfg.GlobalRate}
	}
	srv, err := server.New(sc)
	if err != nil {
		st.Close()
		return fail(err)
	}
	n.srv = srv
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		st.Close()
		return fail(fmt.Errorf("listen on %s: %w (is another server running there? pick another address)", cfg.Addr, err))
	}
	ln = server.LimitListener(ln, cfg.MaxConns)
	n.api = server.NewHTTPServer(srv.Handler(), cfg.Limits)
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	n.endpoint = scheme + "://" + ln.Addr().String()
	go func() {
		if cfg.TLSCert != "" {
			n.errc <- n.api.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey)
			return
		}
		n.errc <- n.api.Serve(ln)
	}()
	if err := n.startKafka(cfg, kln, srv, sc.Auth); err != nil {
		n.Close()
		return nil, err
	}
	if cfg.AdminAddr != "" {
		aln, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil && cfg.AdminFallback != "" {
			aln, err = net.Listen("tcp", cfg.AdminFallback)
		}
		if err != nil {
			n.Close()
			return nil, fmt.Errorf("listen on the admin address %s: %w", cfg.AdminAddr, err)
		}
		n.adminURL = "http://" + aln.Addr().String()
		n.admin = &http.Server{Handler: server.AdminHandler(st), ReadHeaderTimeout: 10 * time.Second}
		go func() { n.errc <- n.admin.Serve(aln) }()
	}
	log.Info("serving", "endpoint", n.endpoint, "star", st.ID(), "admin", cfg.AdminAddr)
	return n, nil
}

func (n *Node) goRun(f func()) {
	n.wg.Add(1)
	go func() { defer n.wg.Done(); f() }()
}

// settlement runs settle, trim and the probe's sweep on timers.
func (n *Node) settlement(ctx context.Context, cfg Config, passIndex bool, sets absorb.Sets, prober *probe.Handler, chains []metastore.ChainID, window *passindex.Window) {
	// One goroutine of settle's CPU work at a time: it shares the star's
	// processors (Settler.CPUWorkers).
	settler := &settle.Settler{Meta: cfg.Meta, Sets: sets, Settled: cfg.Settled, Log: n.log, PassIndex: passIndex, Clock: clock.OrReal(cfg.Star.Clock), CPUWorkers: 1,
		FlushBytes: cfg.FlushBytes, FlushAge: cfg.FlushAge, Fanout: cfg.Fanout, Window: window}
	trimmer := &trim.Trimmer{Meta: cfg.Meta, Sets: sets, Settled: cfg.Settled, Log: n.log, Clock: cfg.Star.Clock, PassIndex: passIndex, Window: window}
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	n.goRun(func() {
		settleEvery := 2 * time.Second
		if passIndex {
			// Each step writes a run, live until flushed: about FlushAge /
			// this many runs in every window's cache (design 014).
			settleEvery = DefaultPassIndexSettleEvery
		}
		every(ctx, or(cfg.SettleEvery, settleEvery), func() {
			_ = absorb.Sweep(ctx, chains, n.log, "settle", func(ctx context.Context, c metastore.ChainID) error {
				_, err := settler.Run(ctx, c)
				return err
			})
		})
	})
	n.goRun(func() {
		every(ctx, or(cfg.TrimEvery, 5*time.Second), func() {
			_ = absorb.Sweep(ctx, chains, n.log, "trim", func(ctx context.Context, c metastore.ChainID) error {
				_, err := trimmer.Run(ctx, c)
				return err
			})
			if _, err := trimmer.Streams(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("trim of streams failed; retrying", "err", err.Error())
			}
		})
	})
	n.goRun(func() {
		every(ctx, or(cfg.ProbeEvery, 30*time.Second), func() {
			rep, err := prober.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				n.log.Warn("garbage probe sweep failed; retrying", "err", err.Error())
			}
			if rep.OrphanCount > 0 {
				n.log.Warn("settled objects no ref points to", "count", rep.OrphanCount, "examples", rep.Orphans)
			}
		})
	})
}

func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Endpoint is the API's base URL.
func (n *Node) Endpoint() string { return n.endpoint }

// AdminURL is the admin endpoint's base URL ("" without one).
func (n *Node) AdminURL() string { return n.adminURL }

// Wait blocks until ctx ends or a server fails.
func (n *Node) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-n.errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	}
}

// ParsePeers parses "star-1=http://host:4780,star-2=..." into star id ->
// API base URL.
func ParsePeers(s string) (map[string]string, error) {
	peers := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, u, ok := strings.Cut(p, "=")
		if !ok || id == "" || u == "" {
			return nil, fmt.Errorf("--peers %q: want star-id=URL pairs separated by commas", p)
		}
		peers[id] = u
	}
	return peers, nil
}
