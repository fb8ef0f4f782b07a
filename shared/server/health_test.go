package server_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
)

// TestDeposedStarIsUnhealthy: star A leads; a successor B with the same id
// takes the chain over. When A next writes it meets B's fence, sheds the
// leadership, and from then on answers Unavailable: its /healthz must say
// so (503, "not leading") for ECS to replace the task. Regression test for
// issue 13 finding 8: it kept answering 200 ok.
func TestDeposedStarIsUnhealthy(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	buckets := []objstore.Bucket{objstore.NewMem("b0"), objstore.NewMem("b1"), objstore.NewMem("b2")}
	mk := func() *star.Star {
		cfg := star.Defaults()
		cfg.Standard = star.ClassConfig{}
		cfg.Express = star.ClassConfig{Buckets: buckets, W: 2, MemoryBufferMiB: 8, ParallelUploads: 4, FlushDeadline: time.Millisecond, FlightKiB: 64, CommitDeadline: 5 * time.Second}
		s, err := star.New(cfg, meta, star.Options{NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W, Backoff: time.Millisecond}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	health := func(s *star.Star) (int, string) {
		rec := httptest.NewRecorder()
		server.AdminHandler(s).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	a := mk()
	var id format.StreamID
	id[15] = 1
	if err := a.Open(star.StreamInfo{ID: id, Class: metastore.Express}); err != nil {
		t.Fatal(err)
	}
	rec := []format.Record{{Body: []byte("x")}}
	if _, err := a.Append(ctx, id, rec, star.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, body := health(a); code != 200 || !strings.HasPrefix(body, "ok\n") {
		t.Fatalf("leading star: /healthz %d %q", code, body)
	}
	b := mk() // the successor: fences A's epoch, mints the next
	_, err := a.Append(ctx, id, rec, star.AppendOptions{})
	if !errors.Is(err, star.ErrNotLeader) {
		t.Fatalf("deposed star's append: %v, want ErrNotLeader", err)
	}
	if code, body := health(a); code != 503 || !strings.Contains(body, "not leading") {
		t.Fatalf("deposed star: /healthz %d %q, want 503 not leading", code, body)
	}
	if code, _ := health(b); code != 200 {
		t.Fatalf("successor: /healthz %d", code)
	}
}
