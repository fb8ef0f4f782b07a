package main

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestDevKafkaLimitFlag: --kafka-max-conns-per-source 2 reaches strand
// dev's Kafka front end: of three connections from one loopback address
// the first two are answered and the third is closed at once (the
// default allows 256). Before the flag existed strand dev refused it.
func TestDevKafkaLimitFlag(t *testing.T) {
	m := runDevUntil(t, `Kafka clients: bootstrap server (\S+) `, func(ctx context.Context, out io.Writer) error {
		cmd := newDev()
		cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--admin-addr", "", "--kafka-addr", "127.0.0.1:0",
			"--log-level", "error", "--exit-with-parent=false", "--kafka-max-conns-per-source", "2"})
		cmd.SetOut(out)
		cmd.SetErr(io.Discard)
		return cmd.ExecuteContext(ctx)
	})
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", m[1])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	for i, c := range conns[:2] {
		if err := apiVersions(c); err != nil {
			t.Fatalf("connection %d, within the limit of 2: %v", i+1, err)
		}
	}
	if err := apiVersions(conns[2]); err == nil {
		t.Fatal("a third connection of one source was answered past --kafka-max-conns-per-source 2")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the third connection is open, unanswered: %v", err)
	}
}

// runDevUntil runs strand dev in this process (run, writing to out)
// until the test ends, and returns the submatches of pattern once its
// output holds it (within 15 s).
func runDevUntil(t *testing.T, pattern string, run func(ctx context.Context, out io.Writer) error) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() { done <- run(ctx, &out) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	re := regexp.MustCompile(pattern)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case err := <-done:
			t.Fatalf("strand dev ended: %v (%s)", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strand dev did not print %s: %q", pattern, out.String())
		}
	}
}

// apiVersions sends an ApiVersions v0 request (correlation id 7) on c
// and reads its answer, within 2 s.
func apiVersions(c net.Conn) error {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	// size, api key 18, version 0, correlation id 7, client id null
	req := binary.BigEndian.AppendUint32(nil, 10)
	req = binary.BigEndian.AppendUint16(req, 18)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint32(req, 7)
	req = binary.BigEndian.AppendUint16(req, 0xffff)
	if _, err := c.Write(req); err != nil {
		return err
	}
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	if id := binary.BigEndian.Uint32(head[4:]); id != 7 {
		return errors.New("answer of another correlation id")
	}
	_, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(head[:4]))-4)
	return err
}
