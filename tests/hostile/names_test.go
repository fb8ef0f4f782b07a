package hostile

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// TestInvisibleCharactersRefused (issue 31): stream names, token prefixes
// and token descriptions with characters that display as nothing or
// reorder the text (bidi controls, zero-width characters, odd spaces) are
// invalid_argument, so strand ls and strand token ls show what is there.
func TestInvisibleCharactersRefused(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	for _, s := range []string{"team-a/\u202egnp.exe", "team-a/a\u200bb", "\ufeffteam-a/x", "team-a/\u2066x\u2069", "team-a/a\u00a0b", "team-a/a\u2028b"} {
		if _, err := admin.CreateStream(ctx, s, client.CreateOptions{Class: "express"}); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("CreateStream %q: %v, want invalid_argument", s, err)
		}
		if _, _, err := admin.CreateToken(ctx, client.TokenSpec{Prefix: s, Ops: []string{"read"}}); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("CreateToken prefix %q: %v, want invalid_argument", s, err)
		}
		if _, _, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"read"}, Description: s}); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("CreateToken description %q: %v, want invalid_argument", s, err)
		}
	}
	if _, err := admin.CreateStream(ctx, "team-a/ünïcode ok", client.CreateOptions{Class: "express"}); err != nil {
		t.Errorf("a visible Unicode name: %v", err)
	}
}
