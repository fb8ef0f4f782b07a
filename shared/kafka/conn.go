package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
)

// conn is one client connection's state.
type conn struct {
	s      *Server
	c      net.Conn
	remote string
	ctx    context.Context // carries the grant once authenticated
	stop   context.Context // ends with the connection: a wait for the held budget gives up
	// authBy is when a connection not yet authenticated is closed
	// (Limits.AuthDeadline).
	authBy time.Time
	authed bool
	slot   *connSlot // its place in Server.conns: authed there too, so it is not shed
	mech   string    // the SASL mechanism the handshake chose
	token  string    // the SASL password, a strand token (rechecked per request)
}

func (s *Server) serveConn(c net.Conn, sl *connSlot) {
	defer c.Close()
	s.meters.conns.Add(1)
	defer s.meters.conns.Add(-1)
	stop, end := context.WithCancel(s.ctx)
	defer end()
	cn := &conn{s: s, c: c, remote: c.RemoteAddr().String(), ctx: s.ctx, stop: stop, authBy: time.Now().Add(s.lim.AuthDeadline), slot: sl}
	if s.cfg.Auth == nil {
		cn.authed = true // no authentication anywhere (tests)
	} else if s.cfg.AnonymousLoopback && isLoopback(c.RemoteAddr()) {
		cn.authed = true
		cn.ctx = auth.WithGrant(cn.ctx, auth.Grant{Ops: []auth.Op{auth.Admin}})
	}
	// Responses go out in request order (the protocol's rule) from a
	// writer, so that a produce's ack can be awaited there while later
	// requests are read and their appends admitted behind it: one
	// partition's batches are admitted, sequenced and acknowledged in
	// request order, and a connection keeps up to maxPipelined requests
	// in flight.
	out := make(chan answer, maxPipelined)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []byte
		abandon := func() {
			end()
			c.Close() // the reader stops too
			for a := range out {
				a.resolve() // still wait: an admitted append's ack is not abandoned early
				s.held.put(a.tenant, a.held)
			}
		}
		for a := range out {
			resp := a.resolve()
			s.meters.served(a.key, s.clk.Now().Sub(a.at))
			if resp == nil {
				s.held.put(a.tenant, a.held)
				continue // acks=0 produce: no response
			}
			if resp == hangUp {
				s.log.Debug("kafka: produce refused by the drain; closing the connection", "remote", cn.remote)
				s.held.put(a.tenant, a.held)
				abandon()
				return
			}
			buf = append(buf[:0], 0, 0, 0, 0)
			buf = binary.BigEndian.AppendUint32(buf, uint32(a.corr))
			if resp.IsFlexible() && resp.Key() != 18 {
				buf = append(buf, 0) // the response header's empty tags
			}
			buf = resp.AppendTo(buf)
			binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
			// A client that reads nothing for the idle timeout is closed:
			// blocked here, the writer would stop the reader too (its
			// queue full), so the read deadline would never fire.
			c.SetWriteDeadline(time.Now().Add(s.lim.IdleTimeout))
			_, err := c.Write(buf)
			s.held.put(a.tenant, a.held) // answered (or the connection is done)
			if err != nil {
				abandon()
				return
			}
		}
	}()
	defer func() {
		close(out)
		<-done
	}()
	for {
		req, err := cn.readRequest()
		if errors.Is(err, ErrRequest) {
			s.meters.refused.Inc()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("kafka: connection closed", "remote", cn.remote, "err", err.Error())
			}
			return
		}
		at := s.clk.Now()
		resolve, err := cn.handle(&req)
		if err != nil {
			s.held.put(req.tenant, req.held)
			s.meters.refused.Inc()
			s.log.Info("kafka: request refused; closing the connection", "remote", cn.remote, "key", req.kreq.Key(), "err", err.Error())
			return
		}
		out <- answer{corr: req.corr, key: req.kreq.Key(), at: at, resolve: resolve, tenant: req.tenant, held: req.held}
	}
}

// maxPipelined bounds the requests of one connection whose responses are
// not written yet (Kafka producers keep at most 5 in flight by default).
const maxPipelined = 32

// answer is one request's response to come: resolve waits for it (nil:
// no response, an acks=0 produce).
type answer struct {
	corr    int32
	key     int16
	at      time.Time // when the request was read
	resolve func() kmsg.Response
	// tenant and held: the request's bytes in the held budget, put back
	// once the answer is written.
	tenant string
	held   int64
}

// hangUp is the answer that closes the connection instead of a response:
// a produce the drain refused whole, held until the front end closes, or
// a fetch that Close cut short.
var hangUp kmsg.Response = new(kmsg.ProduceResponse)

// now is an answer that is ready.
func now(r kmsg.Response) func() kmsg.Response { return func() kmsg.Response { return r } }

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// request is one decoded request.
type request struct {
	kreq     kmsg.Request
	corr     int32
	clientID string
	tenant   string // whose share of the held budget holds it
	held     int64  // its bytes there
}

// ErrRequest: a request the front end cannot decode or will not read; the
// connection is closed.
var ErrRequest = errors.New("kafka: bad request")

// unauthenticated is the held budget's tenant of connections before SASL.
const unauthenticated = "\x00unauthenticated"

// tenant is whose share of the held budget cn's requests take.
func (cn *conn) tenant() string {
	if !cn.authed {
		return unauthenticated
	}
	g, _ := auth.FromContext(cn.ctx)
	return g.Tenant
}

// readBy is the read deadline of cn's next bytes: the idle timeout from
// now, or the authentication deadline while it has not authenticated.
func (cn *conn) readBy() time.Time {
	by := time.Now().Add(cn.s.lim.IdleTimeout)
	if !cn.authed && cn.authBy.Before(by) {
		by = cn.authBy
	}
	return by
}

// readRequest reads one request, bounding it by its API key before its
// body is read (see Limits), and waits for room in the held budget
// before it reads the body (held.go).
func (cn *conn) readRequest() (request, error) {
	cn.c.SetReadDeadline(cn.readBy())
	var hdr [6]byte
	if _, err := io.ReadFull(cn.c, hdr[:]); err != nil {
		return request{}, err
	}
	size := int64(binary.BigEndian.Uint32(hdr[:4]))
	key := int16(binary.BigEndian.Uint16(hdr[4:]))
	max := cn.s.lim.MaxRequestBytes
	if key == 0 && cn.authed {
		max = cn.s.lim.MaxProduceBytes // a produce before SASL is refused: no more than any request
	}
	if size < 2 || size > int64(max) {
		return request{}, fmt.Errorf("%w: %d bytes for key %d (at most %d)", ErrRequest, size, key, max)
	}
	tenant := cn.tenant()
	held := cn.s.held.charge(tenant, size)
	if err := cn.s.held.take(cn.stop, tenant, held); err != nil {
		return request{}, err
	}
	body := make([]byte, size)
	copy(body, hdr[4:])
	// The body may come slowly; it still must come within the idle time
	// (from now: the wait for the budget does not count).
	cn.c.SetReadDeadline(cn.readBy())
	if _, err := io.ReadFull(cn.c, body[2:]); err != nil {
		cn.s.held.put(tenant, held)
		return request{}, err
	}
	req, err := ParseRequest(body)
	if err != nil {
		cn.s.held.put(tenant, held)
		return request{}, err
	}
	req.tenant, req.held = tenant, held
	return req, nil
}

// ParseRequest decodes a request's header and body (a frame without its
// size). Unknown keys and versions the front end does not serve are
// refused with ErrRequest, except ApiVersions, which a client may send at
// any version (it is answered at version 0).
func ParseRequest(body []byte) (request, error) {
	if len(body) < 8 {
		return request{}, fmt.Errorf("%w: header of %d bytes", ErrRequest, len(body))
	}
	key := int16(binary.BigEndian.Uint16(body))
	version := int16(binary.BigEndian.Uint16(body[2:]))
	corr := int32(binary.BigEndian.Uint32(body[4:]))
	rest := body[8:]
	if len(rest) < 2 {
		return request{}, fmt.Errorf("%w: no client id", ErrRequest)
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	var clientID string
	if idLen >= 0 {
		if int(idLen) > len(rest) {
			return request{}, fmt.Errorf("%w: client id of %d bytes", ErrRequest, idLen)
		}
		clientID, rest = string(rest[:idLen]), rest[idLen:]
	}
	v, ok := versions[key]
	if !ok {
		return request{}, fmt.Errorf("%w: api key %d is not served", ErrRequest, key)
	}
	kreq := kmsg.RequestForKey(key)
	if version < v.min || version > v.max {
		if key != 18 {
			return request{}, fmt.Errorf("%w: api key %d version %d (served: %d to %d)", ErrRequest, key, version, v.min, v.max)
		}
		// ApiVersions past what is served: answer v0 with
		// UNSUPPORTED_VERSION (the client retries lower).
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = -1 // marks the downgrade for handleApiVersions
		return request{kreq: r, corr: corr, clientID: clientID}, nil
	}
	kreq.SetVersion(version)
	if kreq.IsFlexible() {
		n, err := skipTags(rest)
		if err != nil {
			return request{}, err
		}
		rest = rest[n:]
	}
	if err := kreq.ReadFrom(rest); err != nil {
		return request{}, fmt.Errorf("%w: api key %d version %d: %v", ErrRequest, key, version, err)
	}
	return request{kreq: kreq, corr: corr, clientID: clientID}, nil
}

// skipTags returns the length of a tagged fields section at b.
func skipTags(b []byte) (int, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return 0, fmt.Errorf("%w: tagged fields", ErrRequest)
	}
	off := k
	for range n {
		_, k := binary.Uvarint(b[off:])
		if k <= 0 {
			return 0, fmt.Errorf("%w: tag", ErrRequest)
		}
		off += k
		l, k := binary.Uvarint(b[off:])
		if k <= 0 || l > uint64(len(b)-off-k) {
			return 0, fmt.Errorf("%w: tag length", ErrRequest)
		}
		off += k + int(l)
	}
	return off, nil
}

// versions are the API keys and versions served. ApiVersions advertises
// exactly these.
var versions = map[int16]struct{ min, max int16 }{
	0:  {3, 9},  // Produce
	1:  {4, 12}, // Fetch
	2:  {1, 6},  // ListOffsets
	3:  {1, 12}, // Metadata
	8:  {2, 8},  // OffsetCommit
	9:  {1, 7},  // OffsetFetch
	10: {0, 3},  // FindCoordinator
	11: {0, 7},  // JoinGroup
	12: {0, 4},  // Heartbeat
	13: {0, 4},  // LeaveGroup
	14: {0, 5},  // SyncGroup
	15: {0, 5},  // DescribeGroups
	16: {0, 4},  // ListGroups
	17: {1, 1},  // SaslHandshake
	18: {0, 3},  // ApiVersions
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	22: {0, 4},  // InitProducerId
	32: {0, 4},  // DescribeConfigs
	36: {0, 2},  // SaslAuthenticate
	37: {0, 3},  // CreatePartitions
	44: {0, 1},  // IncrementalAlterConfigs
}

// handle serves one request and returns its answer to come; an error
// closes the connection.
func (cn *conn) handle(req *request) (func() kmsg.Response, error) {
	if p, ok := req.kreq.(*kmsg.ProduceRequest); ok && cn.authed {
		if err := cn.recheck(); err != nil {
			return nil, err
		}
		return cn.s.produce(cn.ctx, p), nil
	}
	resp, err := cn.handleNow(req)
	if err != nil {
		return nil, err
	}
	return now(resp), nil
}

// handleNow answers every request but Produce.
func (cn *conn) handleNow(req *request) (kmsg.Response, error) {
	switch r := req.kreq.(type) {
	case *kmsg.ApiVersionsRequest:
		return handleApiVersions(r), nil
	case *kmsg.SASLHandshakeRequest:
		return cn.saslHandshake(r), nil
	case *kmsg.SASLAuthenticateRequest:
		return cn.saslAuthenticate(r)
	}
	if !cn.authed {
		return nil, fmt.Errorf("%w: api key %d before SASL authentication", ErrRequest, req.kreq.Key())
	}
	if err := cn.recheck(); err != nil {
		return nil, err
	}
	ctx := cn.ctx
	s := cn.s
	switch r := req.kreq.(type) {
	case *kmsg.MetadataRequest:
		return s.metadata(ctx, r), nil
	case *kmsg.FetchRequest:
		// The answer is held until written: its bound is taken from the
		// held budget first, and what it did not fill is given back.
		// The request's own bytes count in the tenant's share: a bound
		// of the whole share would wait for them for good.
		bound := max(s.held.charge(req.tenant, int64(fetchBudget(r, s.lim.MaxFetchBytes))+req.held)-req.held, 0)
		if err := s.held.take(cn.stop, req.tenant, bound); err != nil {
			return nil, err
		}
		resp := s.fetch(ctx, r)
		keep := min(bound, fetchedBytes(resp))
		s.held.put(req.tenant, bound-keep)
		req.held += keep
		if ctx.Err() != nil {
			// Cut by Close (a drain): its partitions may carry the cut's
			// errors, which a client would act on (kgo: a metadata
			// refresh). It fetches the same offsets again after a
			// reconnect (ADR 0071).
			return hangUp, nil
		}
		return resp, nil
	case *kmsg.ListOffsetsRequest:
		return s.listOffsets(ctx, r), nil
	case *kmsg.CreateTopicsRequest:
		return s.createTopics(ctx, r), nil
	case *kmsg.DeleteTopicsRequest:
		return s.deleteTopics(ctx, r), nil
	case *kmsg.CreatePartitionsRequest:
		return s.createPartitions(ctx, r), nil
	case *kmsg.InitProducerIDRequest:
		return s.initProducerID(r), nil
	case *kmsg.DescribeConfigsRequest:
		return s.describeConfigs(ctx, r), nil
	case *kmsg.IncrementalAlterConfigsRequest:
		return s.alterConfigs(ctx, r), nil
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(ctx, r), nil
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest, *kmsg.HeartbeatRequest, *kmsg.LeaveGroupRequest,
		*kmsg.OffsetCommitRequest, *kmsg.OffsetFetchRequest, *kmsg.DescribeGroupsRequest, *kmsg.ListGroupsRequest:
		if resp := s.notCoordinator(ctx, req.kreq); resp != nil {
			return resp, nil
		}
		if resp := groupDenied(ctx, req.kreq); resp != nil {
			return resp, nil
		}
	}
	switch r := req.kreq.(type) {
	case *kmsg.JoinGroupRequest:
		return s.groups.join(ctx, r, req.clientID, cn.remote), nil
	case *kmsg.SyncGroupRequest:
		return s.groups.sync(ctx, r), nil
	case *kmsg.HeartbeatRequest:
		return s.groups.heartbeat(r), nil
	case *kmsg.LeaveGroupRequest:
		return s.groups.leave(r), nil
	case *kmsg.OffsetCommitRequest:
		return s.groups.offsetCommit(ctx, r), nil
	case *kmsg.OffsetFetchRequest:
		return s.groups.offsetFetch(ctx, r), nil
	case *kmsg.DescribeGroupsRequest:
		return s.groups.describe(ctx, r), nil
	case *kmsg.ListGroupsRequest:
		return s.groups.list(ctx, r), nil
	}
	return nil, fmt.Errorf("%w: api key %d has no handler", ErrRequest, req.kreq.Key())
}

func handleApiVersions(r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	if r.Version < 0 {
		resp.Version = 0
		resp.ErrorCode = errUnsupportedVersion
	} else {
		resp.Version = r.Version
	}
	keys := make([]int16, 0, len(versions))
	for k := range versions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		v := versions[k]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, v.min, v.max
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}
