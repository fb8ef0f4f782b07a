package hostile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// trickle sends a unary call whose 31-byte body arrives one byte every
// 50 ms (1.5 s in all) over a raw HTTP/1.1 connection, and reports whether
// the server answered or hung up before the body was complete.
func trickle(t *testing.T, e *env, token string, headerPause time.Duration) (cutOff bool) {
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"stream":"` + strings.Repeat("x", 18) + `"}`
	head := "POST /strand.v1.StrandService/CheckTail HTTP/1.1\r\nHost: strand\r\nContent-Type: application/json\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n", len(body))
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = bufio.NewReader(conn).ReadByte() // the first byte of an answer, or the hang-up
	}()
	send := func(s string) bool {
		select {
		case <-answered:
			return false
		default:
		}
		_, err := io.WriteString(conn, s)
		time.Sleep(50 * time.Millisecond)
		return err == nil
	}
	if headerPause > 0 { // headers trickled too
		for _, line := range strings.SplitAfter(head, "\r\n") {
			if !send(line) {
				return true
			}
		}
	} else if !send(head) {
		return true
	}
	if !send("\r\n") {
		return true
	}
	for i := range len(body) {
		if !send(body[i : i+1]) {
			return true
		}
	}
	select {
	case <-answered:
		return false // answered only once the whole body was in
	case <-time.After(10 * time.Second):
		t.Fatal("no answer 10 s after the whole request was sent")
	}
	return false
}

// TestTrickledBodyCutOff: a body trickled slower than the body deadline
// is cut off, with or without a valid token; so are trickled headers.
// (The deadlines are shortened here; the defaults are 30 s and 10 s.)
func TestTrickledBodyCutOff(t *testing.T) {
	e := newEnvHTTP(t, func(c *server.Config) { c.Limits.BodyTimeout = 200 * time.Millisecond },
		func(s *http.Server) { s.ReadHeaderTimeout = 200 * time.Millisecond })
	if !trickle(t, e, e.admin, 0) {
		t.Error("a body trickled with a valid token was read to its end")
	}
	if !trickle(t, e, "", 0) {
		t.Error("a body trickled without a token was read to its end")
	}
	if !trickle(t, e, e.admin, 50*time.Millisecond) {
		t.Error("trickled headers were read to their end")
	}
}

// TestTrickledBodyCutOffH2: the same over h2c, where the deadline is the
// stream's (other calls on the connection are not affected).
func TestTrickledBodyCutOffH2(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.BodyTimeout = 200 * time.Millisecond })
	pr, pw := io.Pipe()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer pw.Close()
		for _, b := range []byte(`{"stream":"xxxxxxxxxxxxxxxxxx"}`) {
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+"/strand.v1.StrandService/CheckTail", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.admin)
	res, err := client.NewHTTPClient().Do(req)
	select {
	case <-finished:
		t.Errorf("the trickled body was read to its end (%v)", err)
	default:
	}
	if err == nil {
		if res.ProtoMajor != 2 {
			t.Errorf("spoke %s, want HTTP/2", res.Proto)
		}
		res.Body.Close()
	}
	pr.CloseWithError(io.ErrClosedPipe)
}

// TestBodyDeadlineSparesSessions: the body deadline bounds reading a
// request, not the call: a ReadSession (over HTTP/1.1 and h2c) outlives it
// many times over.
func TestBodyDeadlineSparesSessions(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		c.Limits.BodyTimeout, c.Heartbeat = 100*time.Millisecond, 50*time.Millisecond
	})
	for name, hc := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "h2c": client.NewHTTPClient()} {
		c, err := client.New(e.ts.URL, client.WithToken(e.admin), client.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := c.OpenReadSession(ctx, e.w.Streams[0].Name, client.FromSeq(0), client.SessionOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			if !s.Next() {
				t.Fatalf("%s: the session ended after the body deadline: %v", name, s.Err())
			}
		}
		s.Close()
		cancel()
	}
}
