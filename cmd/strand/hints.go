package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// hint is one rule of explain: an error with this code whose text
// contains every string of has (none: any text), and which did (wire) or
// did not come from the server, gets this advice.
type hint struct {
	code   connect.Code
	wire   int // 1: from the server, -1: not (the client could not reach it), 0: either
	has    []string
	advice string
}

// hints are tried in order; the first that matches gives the advice. A
// hint must follow only the error it is about: the code alone is not
// enough (not_found is a stream or a token hash; unavailable is a server
// that is down or one that answered).
var hints = []hint{
	{connect.CodeUnauthenticated, 0, []string{"expired"}, "the token has expired: use another, or ask an admin for a new one (strand token create)"},
	{connect.CodeUnauthenticated, 0, []string{"revoked"}, "the token was revoked: use another, or ask an admin for a new one (strand token create)"},
	{connect.CodeUnauthenticated, 0, nil, "pass --token-file or set STRAND_TOKEN (strand dev prints a token and writes it to DATA_DIR/token)"},
	{connect.CodePermissionDenied, 0, nil, "this token's prefix or operations do not cover the request; use a token that does (an admin of a wider prefix can create one: strand token create)"},
	{connect.CodeUnavailable, -1, nil, "is the server running? check --endpoint / STRAND_ENDPOINT (strand dev serves http://127.0.0.1:4780)"},
	{connect.CodeUnavailable, 1, []string{"halted"}, "the server's storage is failing (its epoch is halted); nothing was written: retry later, and see the server's /healthz and docs/operations.md"},
	{connect.CodeUnavailable, 1, nil, "the server answered but cannot serve this now (stopping, not the stream's leader, or a store unavailable); retry"},
	{connect.CodeInvalidArgument, -1, []string{"GOAWAY"}, "the server closed the connection (it is stopping); what was printed before is complete; run the command again once the server is back"},
	{connect.CodeInvalidArgument, 1, []string{"requires client timestamps"}, "give the records timestamps: --timestamp T (every record), or --format json with a timestampMs per record"},
	{connect.CodeFailedPrecondition, 1, []string{"fencing token mismatch"}, "the stream is fenced (strand fence): pass its current token with --fence-token; nothing was written"},
	{connect.CodeNotFound, 0, []string{"no token has hash"}, "strand token ls lists the tokens there are; a revoked token is gone"},
	{connect.CodeNotFound, 0, []string{"stream"}, "list streams with `strand ls`; create one with `strand create NAME`"},
}

// layerNames are the package prefixes of the errors the server and the
// client wrap (metastore: invalid argument: ...): the code's sentinels,
// which say nothing to a user of the CLI. explain drops them.
var layerNames = regexp.MustCompile(`(^|: )(?:(?:metastore|dynamo|star|server|absorb|settle|objstore|chain|format|trim|probe|read|node|window|client|rawjson): )+`)

// exclusive is cobra's message for flags of a mutually exclusive group.
var exclusive = regexp.MustCompile(`^if any flags in the group \[([^\]]*)\] are set none of the others can be; \[([^\]]*)\] were all set$`)

// message is err's text without the layer names, a repeated code
// ("invalid_argument: invalid argument: "), and cobra's mutual exclusion
// in plain words.
func message(err error) string {
	msg := err.Error()
	if m := exclusive.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: they are alternatives: give one of them", flagList(m[2]))
	}
	msg = layerNames.ReplaceAllString(msg, "$1")
	return strings.Replace(msg, "invalid_argument: invalid argument: ", "invalid_argument: ", 1)
}

// flagList is cobra's "[seq tail-offset]" list as "--seq and --tail-offset".
func flagList(names string) string {
	fs := strings.Fields(names)
	for i, f := range fs {
		fs[i] = "--" + f
	}
	if len(fs) < 2 {
		return strings.Join(fs, "")
	}
	return strings.Join(fs[:len(fs)-1], ", ") + " and " + fs[len(fs)-1]
}

// explain turns an error into its message and, where one fits, a hint.
func explain(err error) string {
	msg := message(err)
	if errors.Is(err, client.ErrUntrustedLeader) {
		return msg + "\n  hint: the stream's leader is on a host the CLI does not send the token to; if you trust it, pass --trust-leader HOST"
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return msg
	}
	wire := -1
	if connect.IsWireError(ce) {
		wire = 1
	}
	for _, h := range hints {
		if h.code != ce.Code() || (h.wire != 0 && h.wire != wire) {
			continue
		}
		ok := true
		for _, s := range h.has {
			ok = ok && strings.Contains(msg, s)
		}
		if ok {
			return msg + "\n  hint: " + h.advice
		}
	}
	return msg
}
