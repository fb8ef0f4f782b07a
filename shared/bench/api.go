package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
)

// apiTarget drives a server through the Go client: each producer opens one
// pipelined AppendSession per stream it writes.
type apiTarget struct {
	c     *client.Client
	names []string
	ids   []format.StreamID
}

func (t *apiTarget) streamID(i int) format.StreamID { return t.ids[i] }

func (t *apiTarget) open(context.Context, int) (producerTarget, error) {
	return &apiProducer{t: t, sessions: map[int]*client.AppendSession{}}, nil
}

type apiProducer struct {
	t        *apiTarget
	mu       sync.Mutex
	sessions map[int]*client.AppendSession
	recs     []client.Record
}

func (p *apiProducer) submit(ctx context.Context, stream int, recs []format.Record) (waitFn, error) {
	s := p.sessions[stream]
	if s == nil {
		var err error
		if s, err = p.t.c.OpenAppendSession(ctx, p.t.names[stream]); err != nil {
			return nil, err
		}
		p.sessions[stream] = s
	}
	if len(p.recs) != len(recs) {
		p.recs = make([]client.Record, len(recs))
	}
	for i, r := range recs { // Submit encodes the batch before it returns
		p.recs[i] = client.Record{Body: r.Body}
	}
	if err := s.Submit(p.recs, client.AppendOptions{}); err != nil {
		return nil, err
	}
	acks := s.Acks()
	return func() (uint64, error) {
		a, ok := <-acks
		if !ok {
			return 0, fmt.Errorf("append session of %s ended", p.t.names[stream])
		}
		return a.StartSeq, a.Err
	}, nil
}

func (p *apiProducer) close() {
	for _, s := range p.sessions {
		s.Close()
	}
}

// setup creates the streams and learns their ids.
func (t *apiTarget) setup(ctx context.Context, pt point, prefix string) error {
	for i := 0; i < pt.streams; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		st, err := t.c.CreateStream(ctx, name, client.CreateOptions{Class: pt.class.String()})
		if err != nil {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
		id, err := format.ParseStreamID(st.ID)
		if err != nil {
			return fmt.Errorf("stream %s id %q: %w", name, st.ID, err)
		}
		t.names = append(t.names, name)
		t.ids = append(t.ids, id)
	}
	return nil
}

// runAPI starts a whole node on the run's stores, on a loopback port, and
// drives it through the client.
func runAPI(ctx context.Context, cfg Config, pt point) (Result, error) {
	e := newEnv(cfg, pt)
	settled := objstore.Bucket(objstore.NewMem("settled"))
	if cfg.PassIndex {
		settled = e.index // the pass indexes, PUTs counted
	}
	n, err := node.Start(ctx, node.Config{Star: e.starCfg, Meta: e.meta, Settled: settled,
		Addr: "127.0.0.1:0", NoAuth: true, SettleEvery: time.Hour, TrimEvery: time.Hour, ProbeEvery: time.Hour, Logger: quietLog(),
		NoPassIndex: !cfg.PassIndex})
	if err != nil {
		return Result{}, err
	}
	defer n.Close()
	runCtx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); e.janitor(runCtx) }()
	defer func() { cancel(); bg.Wait() }()
	c, err := client.New(n.Endpoint())
	if err != nil {
		return Result{}, err
	}
	t := &apiTarget{c: c}
	if err := t.setup(ctx, pt, "bench"); err != nil {
		return Result{}, err
	}
	r, err := measure(ctx, cfg, pt, e, t)
	return r, err
}

// runRemote drives the server at cfg.Endpoint: latency and throughput only.
func runRemote(ctx context.Context, cfg Config, pt point) (Result, error) {
	c, err := client.New(cfg.Endpoint, client.WithToken(cfg.Token))
	if err != nil {
		return Result{}, err
	}
	t := &apiTarget{c: c}
	if err := t.setup(ctx, pt, fmt.Sprintf("bench-%d", time.Now().UnixNano())); err != nil {
		return Result{}, err
	}
	return measure(ctx, cfg, pt, nil, t)
}
