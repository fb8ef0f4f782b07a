package kafka

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metrics"
)

// Core is what the front end needs of strand: the strand API's calls,
// served in process (server.Server implements it). Every guarantee the
// API gives holds through the front end because it is the same code:
// durable before the answer, exactly once for producer ids, the token's
// permissions.
type Core interface {
	CreateStream(context.Context, *connect.Request[strandv1.CreateStreamRequest]) (*connect.Response[strandv1.CreateStreamResponse], error)
	DeleteStream(context.Context, *connect.Request[strandv1.DeleteStreamRequest]) (*connect.Response[strandv1.DeleteStreamResponse], error)
	ListStreams(context.Context, *connect.Request[strandv1.ListStreamsRequest]) (*connect.Response[strandv1.ListStreamsResponse], error)
	GetStream(context.Context, *connect.Request[strandv1.GetStreamRequest]) (*connect.Response[strandv1.GetStreamResponse], error)
	CheckTail(context.Context, *connect.Request[strandv1.CheckTailRequest]) (*connect.Response[strandv1.CheckTailResponse], error)
	Append(context.Context, *connect.Request[strandv1.AppendRequest]) (*connect.Response[strandv1.AppendResponse], error)
	// Submit admits an append without waiting for its ack (wait returns
	// it); appends submitted in order to a stream are sequenced in order.
	Submit(ctx context.Context, m *strandv1.AppendRequest) (wait func(context.Context) (*strandv1.AppendResponse, error), err error)
	Read(context.Context, *connect.Request[strandv1.ReadRequest]) (*connect.Response[strandv1.ReadResponse], error)
	ReconfigureStream(context.Context, *connect.Request[strandv1.ReconfigureStreamRequest]) (*connect.Response[strandv1.ReconfigureStreamResponse], error)
	Trim(context.Context, *connect.Request[strandv1.TrimRequest]) (*connect.Response[strandv1.TrimResponse], error)
}

// Config configures the front end.
type Config struct {
	Core Core
	// Auth checks SASL/PLAIN passwords as strand tokens. nil: the core
	// runs without authentication (tests) and so does the front end.
	Auth *auth.Checker
	// AnonymousLoopback lets clients on a loopback address in without
	// SASL, as an admin (strand dev only).
	AnonymousLoopback bool
	// AutoCreateTopics creates a missing topic (one partition) that a
	// Metadata request asks for and allows creating, as Kafka's
	// auto.create.topics.enable does (strand dev).
	AutoCreateTopics bool
	// Star is this star's id; Brokers maps star ids to the host:port
	// Kafka clients reach their front end at. Stars are the brokers.
	Star    string
	Brokers map[string]string
	// Advertise is this front end's host:port for clients ("": the
	// listener's address).
	Advertise string
	Limits    Limits
	Clock     clock.Clock
	Rand      io.Reader // producer ids, member ids; nil: crypto/rand
	Logger    *slog.Logger
	// Metrics is the registry the front end's series go to (the star's;
	// nil: none kept).
	Metrics *metrics.Registry
	// GroupRebalanceDelay is how long a group's first join waits for
	// more members (Kafka's group.initial.rebalance.delay.ms; 0: 100 ms).
	GroupRebalanceDelay time.Duration
}

// Server is a Kafka front end over a strand core.
type Server struct {
	cfg    Config
	lim    Limits
	clk    clock.Clock
	log    *slog.Logger
	topics *topicCache
	groups *coordinator
	coord  coordCache
	meters *meters
	// stripes: see submitBatch.
	stripes [stripes]sync.Mutex
	pids    *producers

	// ctx is every request's base: Close cancels it, ending long polls
	// and group waits at once.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	ln        net.Listener
	conns     map[net.Conn]*connSlot // open connections (conns.go)
	sources   map[string]int         // open connections by source address, not charged to a tenant
	tenants   *shares                // open connections charged to a tenant (conns.go)
	closed    bool
	wg        sync.WaitGroup
	advertise string
	held      *heldBudget // request bytes read and not yet answered (held.go)
}

// New builds a front end; Serve runs it on a listener.
func New(cfg Config) (*Server, error) {
	if cfg.Core == nil || cfg.Star == "" {
		return nil, errors.New("kafka: Core and Star are required")
	}
	if cfg.Rand == nil {
		cfg.Rand = crand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.GroupRebalanceDelay <= 0 {
		cfg.GroupRebalanceDelay = 100 * time.Millisecond
	}
	s := &Server{cfg: cfg, lim: cfg.Limits.WithDefaults(), clk: clock.OrReal(cfg.Clock), log: cfg.Logger,
		conns: map[net.Conn]*connSlot{}, sources: map[string]int{}, pids: newProducers()}
	s.tenants = newShares(s.lim.MaxConns, s.lim.MaxConnsPerTenant)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.meters = newMeters(cfg.Metrics)
	s.held = newHeldBudget(int64(s.lim.MaxHeldBytes), int64(s.lim.MaxRequestBytes), s.meters.held)
	s.topics = &topicCache{core: cfg.Core, clk: s.clk}
	s.groups = newCoordinator(s)
	return s, nil
}

// Serve accepts Kafka connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.ln = ln
	s.advertise = s.cfg.Advertise
	if s.advertise == "" {
		s.advertise = ln.Addr().String()
	}
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("kafka: accept: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		sl, victim, why := s.admit(c)
		if sl == nil {
			s.mu.Unlock()
			s.log.Warn("kafka: connection refused: "+why, "remote", c.RemoteAddr().String(), "max", s.lim.MaxConns, "max_per_source", s.lim.MaxConnsPerSource)
			c.Close()
			continue
		}
		s.wg.Add(1)
		s.mu.Unlock()
		if victim != nil {
			s.log.Info("kafka: at the connection limit: closing the oldest connection not authenticated", "remote", victim.RemoteAddr().String())
			victim.Close()
		}
		go func() {
			defer func() {
				s.mu.Lock()
				s.forget(c)
				s.mu.Unlock()
				s.wg.Done()
			}()
			s.serveConn(c, sl)
		}()
	}
}

// Close stops accepting, closes every connection and waits for their
// requests to end. The group coordinator stops; committed offsets are
// durable already.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.groups.close() // releases joins and syncs waiting for a rebalance
	s.wg.Wait()
	return nil
}

// nodeID is a star's Kafka broker id: a hash of its id, stable across
// restarts and configurations.
func nodeID(star string) int32 {
	h := fnv.New32a()
	h.Write([]byte(star))
	return int32(h.Sum32() & 0x7fffffff)
}

// brokers are the stars as Kafka brokers, this one included, by node id.
func (s *Server) brokers() []kmsg.MetadataResponseBroker {
	s.mu.Lock()
	self := s.advertise
	s.mu.Unlock()
	addrs := map[string]string{s.cfg.Star: self}
	for id, a := range s.cfg.Brokers {
		if id != s.cfg.Star {
			addrs[id] = a
		}
	}
	var out []kmsg.MetadataResponseBroker
	for id, a := range addrs {
		host, port, err := splitHostPort(a)
		if err != nil {
			s.log.Warn("kafka: broker address unusable", "star", id, "addr", a, "err", err.Error())
			continue
		}
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = nodeID(id), host, port
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

func splitHostPort(a string) (string, int32, error) {
	host, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, err
	}
	var port int32
	if _, err := fmt.Sscanf(p, "%d", &port); err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q", p)
	}
	return host, port, nil
}

// knownStar reports whether clients can reach the star's front end.
func (s *Server) knownStar(star string) bool {
	_, ok := s.cfg.Brokers[star]
	return ok || star == s.cfg.Star
}
