package s3obj

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/objstoretest"
)

func TestMain(m *testing.M) { emulator.Main(m) }

// client returns an S3 client for endpoint built by NewClient, as production
// builds it, with static test credentials.
func client(t *testing.T, endpoint string) *s3.Client {
	t.Helper()
	c, err := NewClient(context.Background(), Options{
		Region:      emulator.Region,
		Endpoint:    endpoint,
		PathStyle:   true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// newBucket creates a fresh bucket on the emulator and removes it (and its
// objects) when the test ends.
func newBucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	c := client(t, emulator.Endpoint(t))
	name := emulator.Name(t, "s3obj")
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		b := New(c, name)
		keys, err := b.List(ctx, "")
		if err != nil {
			t.Logf("cleanup: list %s: %v", name, err)
			return
		}
		for _, k := range keys {
			if err := b.Delete(ctx, k); err != nil {
				t.Logf("cleanup: delete %s/%s: %v", name, k, err)
			}
		}
		if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Logf("cleanup: delete bucket %s: %v", name, err)
		}
	})
	return c, name
}

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		c, name := newBucket(t)
		return New(c, name)
	})
}

func TestNewClientNeedsRegionOrDefault(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	_, err := NewClient(context.Background(), Options{Endpoint: "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "region") {
		t.Fatalf("NewClient without a region: got %v, want a region error", err)
	}
}

func TestIsDirectoryBucket(t *testing.T) {
	for name, want := range map[string]bool{
		"strand-slots--use1-az4--x-s3": true,
		"strand-settled":               false,
		"x-s3":                         false,
		"bucket--x-s3-not":             false,
	} {
		if got := IsDirectoryBucket(name); got != want {
			t.Errorf("IsDirectoryBucket(%q) = %v, want %v", name, got, want)
		}
	}
}

// action is what the fault proxy does with one request.
type action int

const (
	forward      action = iota // pass through
	forwardDrop                // pass to S3, then close the connection without answering
	forwardStall               // pass to S3, then hold the answer until the client gives up
	conflict409                // answer 409 ConditionalRequestConflict without forwarding
	slowDown503                // answer 503 SlowDown without forwarding
	internal500                // pass to S3, then answer 500 InternalError
)

// faultProxy is a reverse proxy on loopback in front of the emulator whose
// behaviour per request is chosen by decide.
type faultProxy struct {
	srv      *httptest.Server
	target   string
	decide   func(r *http.Request, n int) action
	requests atomic.Int64 // requests seen
	sent     atomic.Int64 // requests forwarded to S3
}

func newFaultProxy(t *testing.T, decide func(r *http.Request, n int) action) *faultProxy {
	p := &faultProxy{target: emulator.Endpoint(t), decide: decide}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	n := int(p.requests.Add(1))
	act := p.decide(r, n)
	switch act {
	case conflict409:
		s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
		return
	case slowDown503:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown")
		return
	}
	body, _ := io.ReadAll(r.Body)
	out, err := http.NewRequestWithContext(context.Background(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	out.ContentLength = int64(len(body))
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.sent.Add(1)
	switch act {
	case forwardDrop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST, as a dropped connection looks
			}
			conn.Close()
		}
		return
	case forwardStall:
		<-r.Context().Done()
		return
	case internal500:
		s3Error(w, http.StatusInternalServerError, "InternalError")
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(respBody)
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message><RequestId>t</RequestId></Error>`, code)
}

// viaProxy returns the bucket reached through p, and the same bucket reached
// directly, for checking what landed.
func viaProxy(t *testing.T, p *faultProxy) (proxied, direct *Bucket) {
	c, name := newBucket(t)
	b := New(client(t, p.srv.URL), name)
	b.sleep = func(context.Context, time.Duration) error { return nil }
	return b, New(c, name)
}

func isPut(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.Count(r.URL.Path, "/") > 1
}

// A PUT that reaches S3 and whose answer is lost is ErrAmbiguous, not retried
// by the SDK into ErrExists, and the object did land: the caller's read-back
// is what resolves it.
func TestPutLostAnswerIsAmbiguous(t *testing.T) {
	p := newFaultProxy(t, func(r *http.Request, n int) action {
		if isPut(r) {
			return forwardDrop
		}
		return forward
	})
	b, direct := viaProxy(t, p)
	ctx := context.Background()
	before := p.sent.Load()
	err := b.PutIfAbsent(ctx, "chains/star-0/1/7", []byte("flight"))
	if !errors.Is(err, objstore.ErrAmbiguous) {
		t.Fatalf("PutIfAbsent with the answer dropped: got %v, want ErrAmbiguous", err)
	}
	if got := p.sent.Load() - before; got != 1 {
		t.Fatalf("PUT reached S3 %d times, want exactly 1 (no hidden SDK retry)", got)
	}
	got, err := direct.Get(ctx, "chains/star-0/1/7", 0, -1)
	if err != nil || string(got) != "flight" {
		t.Fatalf("read back after an ambiguous put: %q, %v; want the object to have landed", got, err)
	}
	if err := direct.PutIfAbsent(ctx, "chains/star-0/1/7", []byte("other")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second put after the ambiguous one: got %v, want ErrExists", err)
	}
}

// A deadline that expires after the PUT reached S3 is ErrAmbiguous too, and
// keeps the context error.
func TestPutDeadlineAfterSendIsAmbiguous(t *testing.T) {
	p := newFaultProxy(t, func(r *http.Request, n int) action {
		if isPut(r) {
			return forwardStall
		}
		return forward
	})
	b, direct := viaProxy(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := b.PutIfAbsent(ctx, "k", []byte("body"))
	if !errors.Is(err, objstore.ErrAmbiguous) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PutIfAbsent past its deadline: got %v, want ErrAmbiguous wrapping DeadlineExceeded", err)
	}
	if size, err := direct.Head(context.Background(), "k"); err != nil || size != 4 {
		t.Fatalf("Head after the timed-out put: %d, %v; want the object to have landed", size, err)
	}
}

// 409 ConditionalRequestConflict is retried with backoff; the retry succeeds.
func TestPutConflictRetried(t *testing.T) {
	p := newFaultProxy(t, func(r *http.Request, n int) action {
		if isPut(r) && n <= 3 {
			return conflict409
		}
		return forward
	})
	c, name := newBucket(t)
	b := New(client(t, p.srv.URL), name)
	var waits []time.Duration
	b.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	if err := b.PutIfAbsent(context.Background(), "k", []byte("body")); err != nil {
		t.Fatalf("PutIfAbsent after 3 conflicts: %v", err)
	}
	want := []time.Duration{ConflictBackoff, 2 * ConflictBackoff, 4 * ConflictBackoff}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("backoff waits %v, want %v", waits, want)
	}
	if got, err := New(c, name).Get(context.Background(), "k", 0, -1); err != nil || string(got) != "body" {
		t.Fatalf("Get: %q, %v", got, err)
	}
}

// Conflicts that never clear end in ErrUnavailable after ConflictAttempts.
func TestPutConflictBounded(t *testing.T) {
	p := newFaultProxy(t, func(r *http.Request, n int) action {
		if isPut(r) {
			return conflict409
		}
		return forward
	})
	b, direct := viaProxy(t, p)
	before := p.requests.Load()
	err := b.PutIfAbsent(context.Background(), "k", []byte("body"))
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("PutIfAbsent under endless conflicts: got %v, want ErrUnavailable", err)
	}
	if got := p.requests.Load() - before; got != ConflictAttempts {
		t.Fatalf("%d PUT attempts, want %d", got, ConflictAttempts)
	}
	if _, err := direct.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head after refused puts: %v, want ErrNotFound", err)
	}
}

// Throttling is ErrUnavailable (nothing written); a 500 on a PUT is
// ErrAmbiguous (it may have been applied, and here it was).
func TestPutStatusMapping(t *testing.T) {
	var mode atomic.Int64 // the proxy's goroutines read it
	mode.Store(int64(slowDown503))
	p := newFaultProxy(t, func(r *http.Request, n int) action {
		if isPut(r) {
			return action(mode.Load())
		}
		return forward
	})
	b, direct := viaProxy(t, p)
	ctx := context.Background()
	if err := b.PutIfAbsent(ctx, "slow", []byte("x")); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("503 SlowDown: got %v, want ErrUnavailable", err)
	}
	if _, err := direct.Head(ctx, "slow"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("after 503: Head %v, want ErrNotFound", err)
	}
	mode.Store(int64(internal500))
	if err := b.PutIfAbsent(ctx, "five", []byte("x")); !errors.Is(err, objstore.ErrAmbiguous) {
		t.Fatalf("500 InternalError after the write landed: got %v, want ErrAmbiguous", err)
	}
	if _, err := direct.Head(ctx, "five"); err != nil {
		t.Fatalf("after 500: Head %v, want the object", err)
	}
}

// Reads through a failing path are ErrUnavailable, never ErrNotFound.
func TestReadFailuresAreUnavailable(t *testing.T) {
	p := newFaultProxy(t, func(r *http.Request, n int) action {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return slowDown503
		}
		return forward
	})
	c, name := newBucket(t)
	pc := s3.NewFromConfig(emulator.ConfigFor(p.srv.URL), func(o *s3.Options) {
		o.UsePathStyle = true
		o.RetryMaxAttempts = 1
	})
	b := New(pc, name)
	ctx := context.Background()
	if err := New(c, name).PutIfAbsent(ctx, "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "k", 0, -1); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Get under 503: %v, want ErrUnavailable", err)
	}
	if _, err := b.Head(ctx, "k"); !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head under 503: %v, want ErrUnavailable", err)
	}
}

// A PUT to an endpoint that refuses connections never left: ErrUnavailable,
// not ErrAmbiguous.
func TestPutConnectionRefusedIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	b := New(client(t, "http://"+addr), "nobucket")
	err = b.PutIfAbsent(context.Background(), "k", []byte("x"))
	if !errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrAmbiguous) {
		t.Fatalf("PutIfAbsent to a closed port: got %v, want ErrUnavailable", err)
	}
}

// A missing bucket is not a missing key.
func TestNoSuchBucketIsNotNotFound(t *testing.T) {
	b := New(client(t, emulator.Endpoint(t)), emulator.Name(t, "absent"))
	_, err := b.Get(context.Background(), "k", 0, -1)
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get from a missing bucket: got %v, want an error that is not ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("Get from a missing bucket: %v, want the S3 code in the message", err)
	}
}

// Get with n == 0 checks the key and offset and returns no bytes.
func TestGetZeroLength(t *testing.T) {
	c, name := newBucket(t)
	b := New(c, name)
	ctx := context.Background()
	if err := b.PutIfAbsent(ctx, "k", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k", 1, 0); err != nil || len(got) != 0 {
		t.Fatalf("Get(1, 0): %q, %v", got, err)
	}
	if _, err := b.Get(ctx, "k", 3, 0); !errors.Is(err, objstore.ErrRange) {
		t.Fatalf("Get(3, 0) at the end: %v, want ErrRange", err)
	}
	if _, err := b.Get(ctx, "nope", 0, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get(missing, 0, 0): %v, want ErrNotFound", err)
	}
	if _, err := b.Get(ctx, "k", -1, 2); !errors.Is(err, objstore.ErrRange) {
		t.Fatalf("Get(-1, 2): %v, want ErrRange", err)
	}
}

// TestGetBounded: a read (whole object or open range) of an object larger
// than the bucket's read bound fails with ErrTooLarge, without reading it
// into memory; reads within the bound are served.
func TestGetBounded(t *testing.T) {
	c, name := newBucket(t)
	ctx := context.Background()
	b := New(c, name)
	body := bytes.Repeat([]byte("x"), 1000)
	if err := b.PutIfAbsent(ctx, "big", body); err != nil {
		t.Fatal(err)
	}
	small := b.WithMaxGet(100)
	for _, r := range [][2]int64{{0, -1}, {10, -1}, {0, 500}} {
		if got, err := small.Get(ctx, "big", r[0], r[1]); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Get(%d, %d) of 1000 bytes with a bound of 100: %d bytes, %v; want ErrTooLarge", r[0], r[1], len(got), err)
		}
	}
	if got, err := small.Get(ctx, "big", 950, -1); err != nil || len(got) != 50 {
		t.Errorf("Get of the last 50 bytes: %d bytes, %v", len(got), err)
	}
	if got, err := b.Get(ctx, "big", 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Errorf("Get with the default bound: %d bytes, %v", len(got), err)
	}
}
