// Package e2e runs the strand binary as a user does: `strand dev` as a
// process, producers through the Go client and the CLI, a SIGKILL in the
// middle, a restart, and a full read-back.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
)

const (
	streams       = 50
	cliStreams    = 5 // of which appended through the CLI
	perStream     = 2000
	killAfter     = 40000 // acked records before the SIGKILL
	clientBatch   = 50
	cliChunk      = 200
	startDeadline = 30 * time.Second
)

type dev struct {
	cmd *exec.Cmd
}

// startDev runs `strand dev` (with extra flags) and waits until it prints
// its endpoint.
func startDev(t *testing.T, bin, dataDir, addr string, extra ...string) *dev {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"dev", "--data-dir", dataDir, "--addr", addr, "--log-level", "warn"}, extra...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(dataDir), "dev.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &dev{cmd: cmd}
	t.Cleanup(func() { d.kill() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving on") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		if !strings.Contains(line, "http://"+addr) {
			t.Fatalf("strand dev says %q, want it to serve on %s", line, addr)
		}
	case <-time.After(startDeadline):
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(dataDir), "dev.log"))
		t.Fatalf("strand dev did not start within %s; log:\n%s", startDeadline, log)
	}
	return d
}

func (d *dev) kill() {
	if d.cmd.Process != nil && d.cmd.ProcessState == nil {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		_ = d.cmd.Wait()
	}
}

func body(name string, seq uint64) string { return fmt.Sprintf("%s/%d", name, seq) }

// produceClient appends to name through an append session from the
// stream's tail until it reaches perStream records or fails. Bodies name
// the seq each record is due to get (one producer per stream, in order).
func produceClient(ctx context.Context, c *client.Client, name string, acked *atomic.Int64, ackedTo *atomic.Uint64) error {
	tail, err := c.CheckTail(ctx, name)
	if err != nil {
		return err
	}
	sess, err := c.OpenAppendSession(ctx, name)
	if err != nil {
		return err
	}
	defer sess.Close()
	sendErr := make(chan error, 1)
	go func() {
		next := tail.NextSeq
		for next < perStream {
			var recs []client.Record
			for i := uint64(0); i < clientBatch && next+i < perStream; i++ {
				recs = append(recs, client.Record{Body: []byte(body(name, next+i))})
			}
			if err := sess.Submit(recs, client.AppendOptions{}); err != nil {
				sendErr <- err
				return
			}
			next += uint64(len(recs))
		}
		sendErr <- sess.CloseSend()
	}()
	want := tail.NextSeq
	for a := range sess.Acks() {
		if a.Err != nil {
			return a.Err
		}
		if a.StartSeq != want {
			return fmt.Errorf("%s: ack for seq %d, want %d", name, a.StartSeq, want)
		}
		want = a.EndSeq
		ackedTo.Store(a.EndSeq)
		acked.Add(int64(a.EndSeq - a.StartSeq))
	}
	if want < perStream {
		if err := <-sendErr; err != nil {
			return err
		}
		return fmt.Errorf("%s: session ended at %d", name, want)
	}
	return nil
}

// produceCLI appends to name with `strand append` in chunks from the tail.
func produceCLI(ctx context.Context, c *client.Client, bin, endpoint, token, name string, acked *atomic.Int64, ackedTo *atomic.Uint64) error {
	for {
		tail, err := c.CheckTail(ctx, name)
		if err != nil {
			return err
		}
		if tail.NextSeq >= perStream {
			return nil
		}
		var sb strings.Builder
		n := min(uint64(cliChunk), perStream-tail.NextSeq)
		for i := range n {
			sb.WriteString(body(name, tail.NextSeq+i))
			sb.WriteByte('\n')
		}
		cmd := exec.CommandContext(ctx, bin, "append", name, "--endpoint", endpoint, "--retry-for", "0") // fails at the kill, as the client producers do
		cmd.Env = append(os.Environ(), "STRAND_TOKEN="+token)
		cmd.Stdin = strings.NewReader(sb.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("strand append %s: %v: %s", name, err, out)
		}
		want := fmt.Sprintf("appended %d records to %s (seqs %d..%d)", n, name, tail.NextSeq, tail.NextSeq+n-1)
		if !strings.Contains(string(out), want) {
			return fmt.Errorf("strand append printed %q, want %q", out, want)
		}
		ackedTo.Store(tail.NextSeq + n)
		acked.Add(int64(n))
	}
}

// checkPrefix reads n's records [0, upto) and checks seqs and bodies.
func checkPrefix(t *testing.T, ctx context.Context, c *client.Client, n string, upto uint64) {
	t.Helper()
	var next uint64
	for next < upto {
		res, err := c.Read(ctx, n, client.FromSeq(next), client.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("%s: read from %d is empty (tail %d), want records up to %d", n, next, res.NextSeq, upto)
		}
		for _, r := range res.Records {
			if r.Seq != next || string(r.Body) != body(n, r.Seq) {
				t.Fatalf("%s: seq %d body %q, want seq %d", n, r.Seq, r.Body, next)
			}
			next++
		}
	}
}

func name(i int) string { return fmt.Sprintf("e2e/stream-%02d", i) }

func TestDevSurvivesKill9(t *testing.T) {
	bin, dataDir, addr, endpoint, token, d, c := devUnderTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Streams: created through the CLI and the client, both classes.
	for i := range streams {
		class := "standard"
		if i%2 == 1 {
			class = "express"
		}
		if i < 3 {
			out, err := exec.Command(bin, "create", name(i), "--class", class, "--endpoint", endpoint, "--token", token).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "created "+name(i)) {
				t.Fatalf("strand create: %v %s", err, out)
			}
			continue
		}
		if _, err := c.CreateStream(ctx, name(i), client.CreateOptions{Class: class}); err != nil {
			t.Fatal(err)
		}
	}

	// ackedTo[i] is the end of stream i's acknowledged prefix.
	ackedTo := make([]atomic.Uint64, streams)
	run := func(phase string) (errs []error) {
		var acked atomic.Int64
		var wg sync.WaitGroup
		var mu sync.Mutex
		killed := make(chan struct{})
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if i < cliStreams {
					err = produceCLI(ctx, c, bin, endpoint, token, name(i), &acked, &ackedTo[i])
				} else {
					err = produceClient(ctx, c, name(i), &acked, &ackedTo[i])
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		if phase == "kill" {
			go func() {
				for acked.Load() < killAfter {
					time.Sleep(5 * time.Millisecond)
				}
				d.kill()
				close(killed)
			}()
		}
		wg.Wait()
		if phase == "kill" {
			<-killed
			t.Logf("killed with SIGKILL after %d acked records", acked.Load())
		}
		return errs
	}

	// Phase 1: produce until the SIGKILL; every producer then fails.
	errs := run("kill")
	if len(errs) == 0 {
		t.Fatal("every producer finished before the kill: the kill was not mid-stream")
	}
	d = startDev(t, bin, dataDir, addr)
	// Nothing acked is lost: every stream still holds its acked prefix,
	// exactly as sent, before anything more is appended.
	for i := range streams {
		want := ackedTo[i].Load()
		tail, err := c.CheckTail(ctx, name(i))
		if err != nil {
			t.Fatal(err)
		}
		if tail.NextSeq < want {
			t.Fatalf("%s: tail %d after the restart, but %d records were acked", name(i), tail.NextSeq, want)
		}
		checkPrefix(t, ctx, c, name(i), want)
	}

	// A tailing reader on one stream sees the rest as it is acked.
	tailName := name(streams - 1)
	rs, err := c.OpenReadSession(ctx, tailName, client.FromSeq(0), client.SessionOptions{Count: perStream})
	if err != nil {
		t.Fatal(err)
	}
	tailed := make(chan error, 1)
	go func() {
		var next uint64
		for rs.Next() {
			for _, r := range rs.Batch().Records {
				if r.Seq != next || string(r.Body) != body(tailName, r.Seq) {
					tailed <- fmt.Errorf("tail saw seq %d body %q, want seq %d", r.Seq, r.Body, next)
					return
				}
				next++
			}
		}
		if next != perStream {
			tailed <- fmt.Errorf("tail ended at %d: %v", next, rs.Err())
			return
		}
		tailed <- nil
	}()

	// Phase 2: finish every stream.
	if errs := run("finish"); len(errs) > 0 {
		t.Fatalf("producers after the restart: %v", errors.Join(errs...))
	}
	select {
	case err := <-tailed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the tailing reader did not see every record")
	}

	// Read back every stream: contiguous seqs from 0, each record the one
	// its producer sent for that seq, nothing missing.
	for i := range streams {
		checkPrefix(t, ctx, c, name(i), perStream)
		if tail, err := c.CheckTail(ctx, name(i)); err != nil || tail.NextSeq != perStream {
			t.Fatalf("%s: tail %+v %v, want %d", name(i), tail, err, perStream)
		}
	}
	// The CLI reads the same thing.
	out, err := exec.Command(bin, "read", name(0), "--endpoint", endpoint, "--token", token, "--tail-offset", "2").Output()
	if err != nil || string(out) != body(name(0), perStream-2)+"\n"+body(name(0), perStream-1)+"\n" {
		t.Fatalf("strand read: %v %q", err, out)
	}
}
