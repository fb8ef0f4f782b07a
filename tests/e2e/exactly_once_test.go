package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/tests/testproc"
)

const (
	eoProducers = 8 // half through the Go client, half through `strand append`
	eoPerProd   = 3000
	eoKills     = 8
	eoCLIChunk  = 300
)

var nextBatchRe = regexp.MustCompile(`producer ([0-9a-f]{32}) next batch seq (\d+)`)

// TestExactlyOnceThroughKill9: strand dev is killed with SIGKILL 8 times at
// random points of the appends and restarted while 8 producers append numbered records
// with default retries (4 through the Go client, 4 through `strand
// append`, rerun with its --producer-id and --batch-seq when an invocation
// fails), and `strand tail` follows the stream throughout. Every record is
// then in the stream exactly once, each producer's in order, seqs
// contiguous, and the tail printed the whole stream exactly once.
func TestExactlyOnceThroughKill9(t *testing.T) {
	bin, dataDir, addr, endpoint, token, d, c := devUnderTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "eo/all"
	if _, err := c.CreateStream(ctx, stream, client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	total := eoProducers * eoPerProd
	// strand tail, from seq 0, until it printed every record.
	var tailOut, tailErr bytes.Buffer
	tail := exec.CommandContext(ctx, bin, "tail", stream, "--seq", "0", "--count", fmt.Sprint(total), "--endpoint", endpoint, "--token", token, "--retry-for", "2m")
	tail.Stdout, tail.Stderr = &tailOut, &tailErr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan error, 1)
	go func() { tailDone <- tail.Wait() }()

	rec := func(p, i int) string { return fmt.Sprintf("p%d/%05d", p, i) }
	var wg sync.WaitGroup
	var reruns, acked atomic.Int64 // acked: records acknowledged so far
	errs := make(chan error, eoProducers)
	done := make(chan struct{})
	for p := range eoProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p%2 == 0 {
				pc, _ := client.New(endpoint, client.WithToken(token), client.WithRetry(client.Retry{MaxAttempts: 1000, MaxElapsed: 2 * time.Minute, BaseDelay: 20 * time.Millisecond, MaxDelay: time.Second}))
				for i := 0; i < eoPerProd; i += 10 {
					var recs []client.Record
					for j := i; j < i+10; j++ {
						recs = append(recs, client.Record{Body: []byte(rec(p, j))})
					}
					if _, err := pc.Append(ctx, stream, recs, client.AppendOptions{}); err != nil {
						errs <- fmt.Errorf("client producer %d at %d: %w", p, i, err)
						return
					}
					acked.Add(int64(len(recs)))
				}
				return
			}
			producer := client.NewProducerID().String()
			batchSeq := uint64(0)
			for i := 0; i < eoPerProd; i += eoCLIChunk {
				var in strings.Builder
				for j := i; j < i+eoCLIChunk; j++ {
					in.WriteString(rec(p, j) + "\n")
				}
				// A failed invocation (its --retry-for ran out) is rerun with
				// the same input from the same batch seq: strand append
				// batches deterministically, so the rerun's batches are the
				// same, and those already committed get their original acks.
				for attempt := 0; ; attempt++ {
					if attempt > 0 {
						reruns.Add(1)
					}
					cmd := exec.CommandContext(ctx, bin, "append", stream, "--endpoint", endpoint, "--token", token,
						"--producer-id", producer, "--batch-seq", fmt.Sprint(batchSeq), "--retry-for", "5s")
					cmd.Stdin = strings.NewReader(in.String())
					var out bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &out
					err := cmd.Run()
					m := nextBatchRe.FindStringSubmatch(out.String())
					if err == nil && m != nil {
						fmt.Sscan(m[2], &batchSeq)
						acked.Add(eoCLIChunk)
						break
					}
					if attempt > 50 || ctx.Err() != nil {
						errs <- fmt.Errorf("cli producer %d at %d: %v: %s", p, i, err, out.String())
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	// The killer: 8 SIGKILLs, each followed by a restart, the k-th at a
	// random point of the k-th eighth of the records (by acknowledged
	// count), so the kills land while producers run however fast the
	// machine appends (on time alone, a quiet machine finished the appends
	// before half the kills).
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	kills, midway := 0, 0
	stretch := int64(total / eoKills)
	for kills < eoKills {
		at := int64(kills)*stretch + rng.Int64N(stretch)
	wait:
		for acked.Load() < at {
			select {
			case <-done:
				break wait
			case <-time.After(5 * time.Millisecond):
			}
		}
		select {
		case <-done:
		default:
			midway++
		}
		d.kill()
		d = startDev(t, bin, dataDir, addr)
		kills++
	}
	<-done
	t.Logf("killed strand dev %d times, %d of them while producers ran; %d strand append reruns", kills, midway, reruns.Load())
	if midway < eoKills/2 {
		t.Fatalf("only %d of %d kills landed while producers ran", midway, kills)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The stream: every record once, each producer's in order, seqs contiguous.
	var all []string
	for next := uint64(0); ; {
		res, err := c.Read(ctx, stream, client.FromSeq(next), client.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			break
		}
		for _, r := range res.Records {
			if r.Seq != next {
				t.Fatalf("seq %d after %d: not contiguous", r.Seq, next-1)
			}
			all = append(all, string(r.Body))
			next++
		}
	}
	if len(all) != total {
		t.Fatalf("the stream holds %d records, want %d (duplicates or losses)", len(all), total)
	}
	nextOf := make([]int, eoProducers)
	for i, b := range all {
		var p, n int
		if _, err := fmt.Sscanf(b, "p%d/%d", &p, &n); err != nil || p < 0 || p >= eoProducers {
			t.Fatalf("seq %d: record %q", i, b)
		}
		if n != nextOf[p] {
			t.Fatalf("seq %d: %q, want p%d/%05d (duplicate, loss or reorder)", i, b, p, nextOf[p])
		}
		nextOf[p]++
	}
	select {
	case err := <-tailDone:
		if err != nil {
			t.Fatalf("strand tail: %v: %s", err, tailErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("strand tail did not print the whole stream; stderr: %s", tailErr.String())
	}
	if got := strings.Split(strings.TrimSuffix(tailOut.String(), "\n"), "\n"); !slicesEqual(got, all) {
		t.Fatalf("strand tail printed %d lines, the stream holds %d: not the whole stream exactly once", len(got), len(all))
	}
	t.Logf("strand tail resumed %d times", strings.Count(tailErr.String(), "resuming at seq"))
}

// devUnderTest builds strand, starts `strand dev` on a free address with a
// fresh data directory, and returns it with its token and a client.
func devUnderTest(t *testing.T) (bin, dataDir, addr, endpoint, token string, d *dev, c *client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin = testproc.Build(t, "./cmd/strand")
	dataDir = filepath.Join(t.TempDir(), "data")
	addr = testproc.FreeAddr(t)
	endpoint = "http://" + addr
	d = startDev(t, bin, dataDir, addr)
	tokb, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token = strings.TrimSpace(string(tokb))
	c, err = client.New(endpoint, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return bin, dataDir, addr, endpoint, token, d, c
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
