package hostile

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// TestStrangersCannotHoldConnections (issue 31 finding 2): connections
// that only send the HTTP/2 preface fill the server's connection limit,
// yet an admin's next call is served at once (a stranger's connection is
// shed for it), and every stranger's connection is closed at the
// authentication deadline.
func TestStrangersCannotHoldConnections(t *testing.T) {
	e := newEnv(t, nil)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max = 16
	hs := server.NewHTTPServer(e.ts.Config.Handler, server.Limits{})
	go func() {
		_ = hs.Serve(server.NewListener(raw, server.ConnLimits{MaxConns: max, AuthDeadline: 2 * time.Second}))
	}()
	t.Cleanup(func() { _ = hs.Close() })
	url := "http://" + raw.Addr().String()

	var strangers []net.Conn
	for range max {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		strangers = append(strangers, c)
	}
	time.Sleep(100 * time.Millisecond) // all accepted
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	c, err := client.New(url, client.WithToken(e.admin), client.WithHTTPClient(&http.Client{Transport: &http.Transport{Protocols: h2c()}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckTail(ctx, e.w.Streams[0].Name); err != nil {
		t.Fatalf("an admin's call with %d strangers' connections open: %v", max, err)
	}
	// The strangers' connections are closed by the deadline.
	for i, s := range strangers {
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, s); err != nil {
			t.Errorf("stranger %d's connection still open 5 s after the 2 s deadline: %v", i, err)
		}
	}
}

func h2c() *http.Protocols {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &p
}
