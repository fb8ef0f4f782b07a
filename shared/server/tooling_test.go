package server_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// h2c is an HTTP client speaking HTTP/2 without TLS, as gRPC tools do
// with -plaintext.
func h2c() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// TestReflectionListsTheService: grpcurl -plaintext HOST list works
// without the .proto and without a token (the schema is public); before
// issue 20 it answered "server does not support the reflection API".
func TestReflectionListsTheService(t *testing.T) {
	n := newNode(t, newMeta(t), "s1", true, nil)
	for _, opt := range []connect.ClientOption{connect.WithGRPC(), connect.WithGRPCWeb()} {
		rc := grpcreflect.NewClient(h2c(), n.ts.URL, opt)
		st := rc.NewStream(context.Background())
		names, err := st.ListServices()
		if err != nil {
			t.Fatalf("ListServices: %v", err)
		}
		for _, want := range []protoreflect.FullName{"strand.v1.StrandService", "grpc.health.v1.Health"} {
			if !slices.Contains(names, want) {
				t.Fatalf("ListServices = %v, want %s among them", names, want)
			}
		}
		files, err := st.FileContainingSymbol("strand.v1.StrandService")
		if err != nil || len(files) == 0 || !strings.HasSuffix(files[0].GetName(), "strand.proto") {
			t.Fatalf("FileContainingSymbol: %d files, %v", len(files), err)
		}
		if _, err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGRPCHealth: grpc.health.v1.Health/Check answers SERVING while the
// star leads, NOT_SERVING once it stops, NotFound for a service it does
// not serve, all without a token.
func TestGRPCHealth(t *testing.T) {
	n := newNode(t, newMeta(t), "s1", true, nil)
	check := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(n.ts.URL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, body := range []string{`{}`, `{"service":"strand.v1.StrandService"}`} {
		if code, got := check(body); code != 200 || !strings.Contains(got, `"SERVING_STATUS_SERVING"`) {
			t.Fatalf("check %s: %d %s, want 200 SERVING", body, code, got)
		}
	}
	if code, got := check(`{"service":"nope.Service"}`); code != 404 || !strings.Contains(got, "unknown service") {
		t.Fatalf("unknown service: %d %s, want 404 unknown service", code, got)
	}
	// The Strand service itself still wants a token.
	resp, err := http.Post(n.ts.URL+"/strand.v1.StrandService/ListStreams", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("ListStreams without a token: %d, want 401", resp.StatusCode)
	}
	n.star.Close()
	if code, got := check(`{}`); code != 200 || !strings.Contains(got, `"SERVING_STATUS_NOT_SERVING"`) {
		t.Fatalf("stopped star: %d %s, want NOT_SERVING", code, got)
	}
}
