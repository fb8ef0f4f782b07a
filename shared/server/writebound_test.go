package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

const readSessionPath = "/strand.v1.StrandService/ReadSession"

// boundedNode serves a node's API with the write timeout d behind a
// handler that reports each call's path on returned once it returns; its
// stream logs/w holds about 8 MiB from seq 0.
func boundedNode(t *testing.T, d time.Duration) (addr string, returned <-chan string) {
	t.Helper()
	addr, returned, _ = boundedServer(t, d)
	return addr, returned
}

// boundedServer is boundedNode that also reports on closed each
// connection the HTTP server closes.
func boundedServer(t *testing.T, d time.Duration) (addr string, returned <-chan string, closed <-chan struct{}) {
	t.Helper()
	n := newNode(t, newMeta(t), "star-0", false, nil)
	c := newClient(t, n, adminTok)
	ctx := context.Background()
	_, err := c.CreateStream(ctx, "logs/w", client.CreateOptions{})
	must(t, err)
	body := bytes.Repeat([]byte("w"), 8<<10)
	for range 16 {
		rs := make([]client.Record, 64)
		for i := range rs {
			rs[i] = client.Record{Body: body}
		}
		_, err := c.Append(ctx, "logs/w", rs, client.AppendOptions{})
		must(t, err)
	}
	server.SetLimits(n.srv, server.Limits{WriteTimeout: d})
	h := n.srv.Handler()
	ch := make(chan string, 16)
	ts := httptest.NewUnstartedServer(nil)
	// The server a node runs (NewHTTPServer: its connections' settings).
	ts.Config = server.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		ch <- r.URL.Path
	}), server.Limits{WriteTimeout: d})
	cl := make(chan struct{}, 16)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			cl <- struct{}{}
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://"), ch, cl
}

// readSessionBody is a Connect streaming request body (one JSON message)
// opening a read session of logs/w from seq 0.
func readSessionBody() []byte {
	msg := []byte(`{"stream":"logs/w","seqNum":"0"}`)
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	return append(b, msg...)
}

// dialSmall dials addr with a 4 KiB receive buffer, so that a client that
// stops reading stops the server's writes soon.
func dialSmall(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func rawReadSession(t *testing.T, c net.Conn) {
	t.Helper()
	body := readSessionBody()
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: strand\r\nContent-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n", readSessionPath, len(body))
	if _, err := c.Write(append([]byte(req), body...)); err != nil {
		t.Fatal(err)
	}
}

// waitReturned waits up to wait for the read session's handler to return.
func waitReturned(returned <-chan string, wait time.Duration) (time.Duration, bool) {
	start := time.Now()
	timeout := time.After(wait)
	for {
		select {
		case p := <-returned:
			if p == readSessionPath {
				return time.Since(start), true
			}
		case <-timeout:
			return wait, false
		}
	}
}

// TestStalledHTTP1ReaderCut: a raw HTTP/1 client opens a read session of
// 8 MiB and reads nothing. The server's write blocks on the full socket;
// with a write timeout of 300 ms the handler returns (its session, read
// ahead and subscription released) and the connection is closed. Before
// the write bound, the handler was still blocked after 10 s.
func TestStalledHTTP1ReaderCut(t *testing.T) {
	addr, returned := boundedNode(t, 300*time.Millisecond)
	c := dialSmall(t, addr)
	rawReadSession(t, c)
	took, ok := waitReturned(returned, 10*time.Second)
	if !ok {
		t.Fatalf("the read session of a client that reads nothing still runs after %s (write timeout 300 ms)", took)
	}
	t.Logf("handler returned %s after the request", took)
	// The connection is closed: what the client reads ends (before the
	// 8 MiB the session would have sent).
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		t.Fatalf("reading the cut connection: %v after %d bytes; want EOF", err, n)
	}
	if n >= 8<<20 {
		t.Fatalf("the client read %d bytes from a cut session: the whole stream", n)
	}
}

// TestSlowHTTP1ReaderNotCut: a client that reads slowly but steadily (32
// KiB every 100 ms, a 64 KiB chunk in about 0.2 s) keeps its session
// under a write timeout of 2 s: after 3 s its handler still runs and
// bytes keep coming. Without TCP_NOTSENT_LOWAT a write stayed blocked
// over 3 s at that rate (Linux wakes a writer once a third of the send
// buffer is free), and this failed.
func TestSlowHTTP1ReaderNotCut(t *testing.T) {
	addr, returned := boundedNode(t, 2*time.Second)
	c := dialSmall(t, addr)
	rawReadSession(t, c)
	buf := make([]byte, 32<<10)
	var got int
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := io.ReadFull(c, buf)
		got += n
		if err != nil {
			t.Fatalf("a slow reader was cut off after %d bytes: %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case p := <-returned:
		t.Fatalf("handler of %s returned while its client read steadily (%d bytes)", p, got)
	default:
	}
	t.Logf("read %d bytes in 3 s", got)
}

// h2ReadSession opens a read session of logs/w on c as an HTTP/2 client
// whose streams' window is window (and, when it is not 0, its connection's
// too), and returns c's framer.
func h2ReadSession(t *testing.T, c net.Conn, window uint32) *http2.Framer {
	t.Helper()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	must(t, fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}))
	if window > 0 {
		must(t, fr.WriteWindowUpdate(0, window))
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "strand"}, {":path", readSessionPath},
		{"content-type", "application/connect+json"}, {"connect-protocol-version", "1"}} {
		must(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}))
	must(t, fr.WriteData(1, true, readSessionBody()))
	return fr
}

// TestStalledHTTP2ReaderCut: an HTTP/2 client opens a read session and
// grants no window (SETTINGS_INITIAL_WINDOW_SIZE 0), reading frames but
// never taking data. The server's first DATA frame blocks; with a write
// timeout of 300 ms the stream is reset and the handler returns. Before
// the write bound, no reset came in 10 s.
func TestStalledHTTP2ReaderCut(t *testing.T) {
	addr, returned := boundedNode(t, 300*time.Millisecond)
	c := dialSmall(t, addr)
	fr := h2ReadSession(t, c, 0)
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no reset of the stalled stream after %s: %v", time.Since(start), err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				must(t, fr.WriteSettingsAck())
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				must(t, fr.WritePing(true, f.Data))
			}
		case *http2.DataFrame:
			t.Fatalf("a DATA frame of %d bytes with no window granted", len(f.Data()))
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v before the stream's reset", f.ErrCode)
		case *http2.RSTStreamFrame:
			if f.StreamID != 1 {
				t.Fatalf("reset of stream %d", f.StreamID)
			}
			t.Logf("stream reset (%v) %s after the request", f.ErrCode, time.Since(start))
			if took, ok := waitReturned(returned, 5*time.Second); !ok {
				t.Fatalf("the stream was reset but its handler still runs %s later", took)
			}
			return
		}
	}
}

// TestStalledHTTP2ConnCut: an HTTP/2 client grants a window of 1 GiB,
// opens a read session of 8 MiB and then reads nothing from its socket.
// The handler's stream is cut at the write timeout, but the connection's
// frame writer stays blocked on the full socket: HTTP/2's WriteByteTimeout
// closes the connection, and it is the write timeout (300 ms here). Before
// it was wired to the setting, it was the 30 s default and the connection
// was still open after 10 s.
func TestStalledHTTP2ConnCut(t *testing.T) {
	addr, _, closed := boundedServer(t, 300*time.Millisecond)
	c := dialSmall(t, addr)
	h2ReadSession(t, c, 1<<30)
	start := time.Now()
	select {
	case <-closed:
		t.Logf("connection closed %s after the request", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection of a client that reads nothing is still open after %s (write timeout 300 ms)", time.Since(start))
	}
}
