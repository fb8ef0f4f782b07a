package kafka

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// closedWithin reports whether c is closed by the server within d (a read
// ends with EOF or a reset, not a timeout).
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return !isTimeout(err)
		}
	}
}

// TestStrangerClosedAtAuthDeadline (ADR 0074): with SASL required, a
// connection that has not authenticated 300 ms after its accept is
// closed, whether it sends nothing or keeps sending ApiVersions; one that
// authenticated stays. Strangers held Kafka connections (of 1024) for the
// idle timeout, 10 minutes, before: it failed then (still open after 2 s).
func TestStrangerClosedAtAuthDeadline(t *testing.T) {
	addr, tok := connsServer(t, Limits{AuthDeadline: 300 * time.Millisecond}, true)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	chatty, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer chatty.Close()
	authed := saslDial(t, addr, tok)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // ApiVersions every 50 ms, answers not read
		for i := int32(0); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := chatty.Write(appendRequest(kmsg.NewPtrApiVersionsRequest(), i)); err != nil {
				return
			}
		}
	}()
	if !closedWithin(silent, 2*time.Second) {
		t.Fatal("a connection that sent nothing is still open 2 s after its accept (auth deadline 300 ms)")
	}
	if !closedWithin(chatty, 2*time.Second) {
		t.Fatal("a connection sending ApiVersions without SASL is still open 2 s after its accept")
	}
	time.Sleep(300 * time.Millisecond)
	resp := kmsg.NewPtrApiVersionsResponse()
	exchange(t, authed, 9, kmsg.NewPtrApiVersionsRequest(), resp) // fails if it was closed
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("the authenticated connection's ApiVersions: %+v", resp)
	}
}
