package client_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strandlog/strand/shared/client"
)

// TestMain checks, after every test, that no goroutine was left behind
// (the in-process test server is stopped by each test).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAppendSessionCloseWithUnreadAcks: a session closed with more acks
// unread than its ack buffer holds leaves no goroutine behind. Regression
// test: it failed before the fix (the receive goroutine stayed blocked
// sending the 65th ack forever).
func TestAppendSessionCloseWithUnreadAcks(t *testing.T) {
	url, stop := startServer()
	defer stop()
	hc := client.NewHTTPClient()
	defer hc.CloseIdleConnections()
	c, err := client.New(url, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.CreateStream(ctx, "leak", client.CreateOptions{Class: "standard"}); err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenAppendSession(ctx, "leak")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		if err := s.Submit([]client.Record{{Body: []byte(fmt.Sprint(i))}}, client.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every batch acknowledged (read back through a unary call) while the
	// session's acks stay unread.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tail, err := c.CheckTail(ctx, "leak")
		if err != nil {
			t.Fatal(err)
		}
		if tail.NextSeq == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tail %d, want %d", tail.NextSeq, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Close()
	hc.CloseIdleConnections()
	stop()
	if err := goleak.Find(); err != nil {
		t.Fatal(err)
	}
}
