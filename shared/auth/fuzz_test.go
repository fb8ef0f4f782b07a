package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// FuzzParseOps and bearer parsing: never a panic; accepted operations are
// known ones; a header yields a token only when it is well formed.
func FuzzParseOps(f *testing.F) {
	f.Add("read,append", "Bearer strand_aaaa")
	f.Add("admin", "bearer  x")
	f.Add(",,", "")
	f.Fuzz(func(t *testing.T, ops, header string) {
		if got, err := ParseOps(ops); err == nil {
			for _, op := range got {
				if op != Read && op != Append && op != Admin {
					t.Fatalf("ParseOps(%q) accepted %q", ops, op)
				}
			}
		}
		_ = bearer(header)
		_ = WellFormed(header)
	})
}

// FuzzBearer: any Authorization header, through the bearer parser and the
// HTTP middleware of a checker with no token issued, is refused with 401
// (or 429 past the lookup limits) before the handler runs; a parsed token
// comes only from a "Bearer " header and carries no surrounding space.
func FuzzBearer(f *testing.F) {
	f.Add("Bearer strand_" + strings.Repeat("a", 52))
	f.Add("bearer\tstrand_x")
	f.Add("Basic dXNlcjpwYXNz")
	f.Add("Bearer  " + strings.Repeat("7", 60) + " ")
	f.Add("")
	c := &Checker{Meta: metastore.NewMem()}
	h := Middleware(c, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("the handler ran without a valid token")
	}))
	f.Fuzz(func(t *testing.T, header string) {
		tok := bearer(header)
		if tok != "" {
			if strings.TrimSpace(tok) != tok || len(header) < 7 || !strings.EqualFold(header[:7], "Bearer ") {
				t.Fatalf("bearer(%q) = %q", header, tok)
			}
		}
		req := httptest.NewRequest(http.MethodPost, "/strand.v1.StrandService/ListStreams", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header["Authorization"] = []string{header}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized && rec.Code != http.StatusTooManyRequests {
			t.Fatalf("header %q: status %d", header, rec.Code)
		}
	})
}
