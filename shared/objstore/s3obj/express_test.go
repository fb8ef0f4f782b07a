package s3obj

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// sessionServer answers CreateSession with fresh credentials (token
// "tok-<n>", expiring after ttl) and GetObject with "data", recording
// every request.
type sessionServer struct {
	ttl time.Duration

	mu   sync.Mutex
	reqs []*http.Request
	n    int
}

func (s *sessionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	s.mu.Unlock()
	if _, ok := r.URL.Query()["session"]; ok {
		s.mu.Lock()
		s.n++
		n := s.n
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<CreateSessionResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Credentials>
<SessionToken>tok-%d</SessionToken><SecretAccessKey>secret-%d</SecretAccessKey><AccessKeyId>key-%d</AccessKeyId>
<Expiration>%s</Expiration></Credentials></CreateSessionResult>`, n, n, n, time.Now().Add(s.ttl).UTC().Format(time.RFC3339))
		return
	}
	w.Header().Set("Content-Length", "4")
	_, _ = w.Write([]byte("data"))
}

func (s *sessionServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

const dirBucket = "strand-111111111111--use1-az4--x-s3"

func sessionClient(t *testing.T, srv *httptest.Server, mode string) *Bucket {
	t.Helper()
	c, err := NewClient(t.Context(), Options{
		Region: "us-east-1", Endpoint: srv.URL, PathStyle: true, ExpressSessionMode: mode,
		Credentials: credentials.NewStaticCredentialsProvider("base-key", "base-secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return New(c, dirBucket)
}

// getOnce makes one GET through a client with the given session mode and
// returns the server's record of it.
func getOnce(t *testing.T, mode string) *sessionServer {
	t.Helper()
	srv := &sessionServer{ttl: 5 * time.Minute}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if _, err := sessionClient(t, hs, mode).Get(t.Context(), "k", 0, -1); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestExpressReadOnlySession: with ExpressSessionMode ReadOnly, the client
// asks CreateSession for a ReadOnly session (x-amz-create-session-mode),
// signed with the base credentials, and signs the GET with the session's
// token; one session serves several requests.
func TestExpressReadOnlySession(t *testing.T) {
	srv := &sessionServer{ttl: 5 * time.Minute}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	b := sessionClient(t, hs, "ReadOnly")
	for range 3 {
		got, err := b.Get(t.Context(), "chains/k", 0, -1)
		if err != nil || string(got) != "data" {
			t.Fatalf("get: %q %v", got, err)
		}
	}
	reqs := srv.requests()
	var sessions, gets int
	for _, r := range reqs {
		if _, ok := r.URL.Query()["session"]; ok {
			sessions++
			if m := r.Header.Get("x-amz-create-session-mode"); m != "ReadOnly" {
				t.Errorf("CreateSession mode %q, want ReadOnly", m)
			}
			if a := r.Header.Get("Authorization"); !strings.Contains(a, "Credential=base-key/") {
				t.Errorf("CreateSession not signed with the base credentials: %s", a)
			}
			if !strings.Contains(r.URL.Path, dirBucket) {
				t.Errorf("CreateSession on %s", r.URL.Path)
			}
			continue
		}
		gets++
		if tok := r.Header.Get("x-amz-s3session-token"); tok != "tok-1" {
			t.Errorf("GET %s with session token %q, want tok-1", r.URL.Path, tok)
		}
		if a := r.Header.Get("Authorization"); !strings.Contains(a, "Credential=key-1/") {
			t.Errorf("GET not signed with the session's key: %s", a)
		}
	}
	if sessions != 1 || gets != 3 {
		t.Errorf("%d CreateSession and %d GET requests, want 1 and 3", sessions, gets)
	}
}

// TestExpressSessionRenewed: a session within a minute of expiry is
// replaced before the next request.
func TestExpressSessionRenewed(t *testing.T) {
	srv := &sessionServer{ttl: 30 * time.Second}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	b := sessionClient(t, hs, "ReadOnly")
	for range 2 {
		if _, err := b.Get(t.Context(), "k", 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	var tokens []string
	for _, r := range srv.requests() {
		if t := r.Header.Get("x-amz-s3session-token"); t != "" {
			tokens = append(tokens, t)
		}
	}
	if strings.Join(tokens, ",") != "tok-1,tok-2" {
		t.Errorf("session tokens %v, want a new session per request (each expires within a minute)", tokens)
	}
}

// TestExpressDefaultSessionAsksNoMode documents why the provider exists:
// the SDK's default provider sends no mode (S3 then creates ReadWrite
// sessions, which a ReadOnly-only role is refused).
func TestExpressDefaultSessionAsksNoMode(t *testing.T) {
	t.Setenv(EnvExpressSessionMode, "")
	srv := getOnce(t, "")
	n := 0
	for _, r := range srv.requests() {
		if _, ok := r.URL.Query()["session"]; ok {
			n++
			if m := r.Header.Get("x-amz-create-session-mode"); m != "" {
				t.Errorf("the SDK default asked for mode %q", m)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d CreateSession requests, want 1", n)
	}
}

func TestExpressSessionModeFromEnv(t *testing.T) {
	t.Setenv(EnvExpressSessionMode, "ReadOnly")
	srv := getOnce(t, "")
	if m := srv.requests()[0].Header.Get("x-amz-create-session-mode"); m != "ReadOnly" {
		t.Errorf("mode %q from %s=ReadOnly", m, EnvExpressSessionMode)
	}
	t.Setenv(EnvExpressSessionMode, "readonly")
	_, err := NewClient(t.Context(), Options{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}})
	if !errors.Is(err, ErrSessionMode) || !strings.Contains(err.Error(), EnvExpressSessionMode) {
		t.Errorf("bad mode in the environment: %v", err)
	}
	if _, err := NewClient(t.Context(), Options{Region: "us-east-1", ExpressSessionMode: "RO"}); !errors.Is(err, ErrSessionMode) {
		t.Errorf("bad mode in the options: %v", err)
	}
}
