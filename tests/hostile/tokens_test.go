package hostile

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/server"
)

// TestRandomTokenFlood: 10,001 random well-formed tokens cost a bounded
// number of metastore reads (the per-source burst), are all refused, and do
// not evict the admin token's cached grant.
func TestRandomTokenFlood(t *testing.T) {
	var meta *metacount.Store
	e := newEnv(t, func(c *server.Config) {
		meta = metacount.New(c.Meta)
		// A clock that stands still: the limiter refills nothing while the
		// flood runs, so the bound is exact.
		now := time.Unix(1_800_000_000, 0)
		c.Auth = &auth.Checker{Meta: meta, Now: func() time.Time { return now }}
	})
	if code := e.post(t, "/strand.v1.StrandService/ListStreams", e.admin, strings.NewReader("{}"), false); code != "" {
		t.Fatalf("admin: %s", code)
	}
	before := meta.Snapshot().Of(metacount.GetToken)
	const flood = 10_001
	tokens := make(chan string, flood)
	for range flood {
		tk, err := auth.NewToken(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tokens <- tk
	}
	close(tokens)
	var (
		mu    sync.Mutex
		codes = map[string]int{}
		wg    sync.WaitGroup
	)
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for range 8 {
		wg.Go(func() {
			for tk := range tokens {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+"/strand.v1.StrandService/ListStreams", nil)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tk)
				res, err := cl.Do(req)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				mu.Lock()
				codes[res.Status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	reads := meta.Snapshot().Of(metacount.GetToken) - before
	t.Logf("answers %v; %d metastore token reads", codes, reads)
	if codes["200 OK"] > 0 || codes["401 Unauthorized"]+codes["429 Too Many Requests"] != flood {
		t.Errorf("%d random tokens were accepted", codes["200 OK"])
	}
	if reads > int64(auth.DefaultSourceRate.Burst) {
		t.Errorf("%d random tokens from one source cost %d metastore reads (bound: the source burst %d)", flood, reads, auth.DefaultSourceRate.Burst)
	}
	before = meta.Snapshot().Of(metacount.GetToken)
	if code := e.post(t, "/strand.v1.StrandService/ListStreams", e.admin, strings.NewReader("{}"), false); code != "" {
		t.Fatalf("admin after the flood: %s", code)
	}
	if n := meta.Snapshot().Of(metacount.GetToken) - before; n != 0 {
		t.Errorf("the admin token's grant was evicted by the flood: %d reads", n)
	}
}
