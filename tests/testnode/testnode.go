// Package testnode starts, for tests that talk to a star through its API
// in process (tests/hostile, tests/badinput, tests/linear), a world of one node on the
// simulated stores (tests/sim) and its API server with authentication,
// served over HTTP/1.1 and h2c as a node serves it
// (server.NewHTTPServer); and issues tokens.
package testnode

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/tests/sim"
)

// API is a started node and its API server; both stop at the test's
// cleanup.
type API struct {
	W  *sim.World
	N  *sim.Node
	TS *httptest.Server
}

// Start starts the node of the world of seed 1 and its API with
// authentication. mod (if not nil) changes the server's configuration
// (sim.World.ServerConfig), httpMod (if not nil) the HTTP server's.
func Start(t testing.TB, mod func(*server.Config), httpMod func(*http.Server)) *API {
	t.Helper()
	return StartWorld(t, 1, true, mod, httpMod)
}

// StartWorld is Start with the world's seed and with or without
// authentication.
func StartWorld(t testing.TB, seed int64, withAuth bool, mod func(*server.Config), httpMod func(*http.Server)) *API {
	t.Helper()
	w, err := sim.NewWorld(seed, sim.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := w.StartNode(ctx, 1, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	sc := w.ServerConfig(n, withAuth)
	if mod != nil {
		mod(&sc)
	}
	srv, err := server.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config = server.NewHTTPServer(srv.Handler(), sc.Limits)
	if httpMod != nil {
		httpMod(ts.Config)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return &API{W: w, N: n, TS: ts}
}

// Issue issues the token made of 32 bytes b, for the streams under prefix
// and ops, and returns it.
func (a *API) Issue(t testing.TB, b byte, prefix string, ops ...auth.Op) string {
	t.Helper()
	tok := Token(t, b)
	if err := auth.Issue(context.Background(), a.W.Meta, tok, prefix, ops); err != nil {
		t.Fatal(err)
	}
	return tok
}

// Token is the token made of 32 bytes b (not issued).
func Token(t testing.TB, b byte) string {
	t.Helper()
	tok, err := auth.NewToken(bytes.NewReader(bytes.Repeat([]byte{b}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
