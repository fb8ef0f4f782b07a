package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/rawjson"
)

// The stream check before the body (ADR 0074). ADR 0070 authorizes an
// append on the stream read from its encoded bytes before decoding it,
// but Connect reads (and inflates) the whole message first: a token
// scoped elsewhere made the server read up to 6 MiB of JSON, or inflate
// a small gzip body to 6 MiB, before its refusal. An Append's body is
// read up to sniffPrefix bytes of its message (decompressed) first, and
// the stream the message names first is authorized from them, before the
// rest is read. A message longer than that must name its stream first
// (protobuf: field 1 before any other, as every encoder writes fields in
// number order; JSON: "stream" as the object's first member, as protojson
// and strand's clients write it); the handler refuses an append whose
// decoded stream is not the one named first (authorizeAppend), so the
// stream authorized before the body is the stream appended to. A message
// that fits in the prefix is checked as before, from the stash. Each
// AppendSession message is read so too, at its envelope's prefix
// (streamBudget.sniffMessage).

// sniffPrefix is the most of an Append's message, decompressed, read
// before its stream is authorized.
const sniffPrefix = 64 << 10

// ErrStreamNotFirst: an append longer than sniffPrefix whose message does
// not name its stream first, or names another stream later.
var ErrStreamNotFirst = errors.New("server: an append over 64 KiB must name its stream first")

// sniffedKey is the context key of the stream an Append's message named
// first (sniffAppend), when it was read before the body.
type sniffedKey struct{}

// sniffedStream is the stream ctx's Append, or the AppendSession message
// just received, named first, if read so.
func sniffedStream(ctx context.Context) (string, bool) {
	if sb, ok := ctx.Value(budgetKey{}).(*streamBudget); ok {
		return sb.sniffedStream()
	}
	s, ok := ctx.Value(sniffedKey{}).(string)
	return s, ok
}

// sessionSniffer is a streamBudget's sniff for the AppendSession r (nil
// when its codec is not one the server decodes): each message over
// sniffPrefix is authorized on the stream it names first before the rest
// of it is read.
func sessionSniffer(r *http.Request) func(msg []byte, compressed, complete bool) (string, bool, error) {
	codec, encoding, _ := appendCoding(r.Header)
	if codec == "" {
		return nil
	}
	ctx := r.Context()
	return func(msg []byte, compressed, complete bool) (string, bool, error) {
		enc := ""
		if compressed {
			enc = encoding
		}
		name, ok, err := sniffMessage(codec, enc, msg, complete)
		if err == nil && ok {
			err = allowSniffed(ctx, name)
		}
		return name, ok, err
	}
}

// authorizeSniffed reads the first bytes of an Append's body and
// authorizes the call's grant to append to the stream its message names
// first; it returns r with the whole body and that stream in its context,
// or a Connect error to answer. Requests it cannot read a stream from
// (a short message, a codec or encoding Connect will refuse) pass as
// they are.
func authorizeSniffed(r *http.Request) (*http.Request, error) {
	name, ok, err := sniffAppend(r)
	if err == nil && ok {
		err = allowSniffed(r.Context(), name)
	}
	if err != nil || !ok {
		return r, err
	}
	return r.WithContext(context.WithValue(r.Context(), sniffedKey{}, name)), nil
}

// allowSniffed authorizes ctx's grant (if any) to append to name, read
// before the message was: a Connect error, or nil.
func allowSniffed(ctx context.Context, name string) error {
	g, authed := auth.FromContext(ctx)
	if !authed {
		return nil
	}
	if err := checkName(name); err != nil {
		return err
	}
	if err := g.Allow(auth.Append, name); err != nil {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w on stream %q", err, name))
	}
	return nil
}

// appendCoding is an append call's codec ("proto" or "json"; "": one the
// server does not decode) and message encoding, and whether its messages
// are enveloped (gRPC, gRPC-Web, Connect streaming), from its headers.
func appendCoding(h http.Header) (codec, encoding string, enveloped bool) {
	ct := h.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(strings.ToLower(ct))
	encoding = h.Get("Content-Encoding")
	switch {
	case strings.HasPrefix(ct, "application/grpc"):
		enveloped, codec, encoding = true, "proto", h.Get("Grpc-Encoding")
		if i := strings.IndexByte(ct, '+'); i >= 0 {
			codec = ct[i+1:]
		}
	case strings.HasPrefix(ct, "application/connect+"):
		enveloped, codec, encoding = true, strings.TrimPrefix(ct, "application/connect+"), h.Get("Connect-Content-Encoding")
	case strings.HasPrefix(ct, "application/"):
		codec = strings.TrimPrefix(ct, "application/")
	}
	if codec == rawjson.Name {
		codec = "json"
	}
	if codec != "proto" && codec != "json" {
		codec = ""
	}
	return codec, encoding, enveloped
}

// sniffAppend reads up to sniffPrefix bytes of r's message (its body; with
// gRPC, the first envelope's), and returns the stream the message names
// first (sniffMessage). r.Body is given back whole.
func sniffAppend(r *http.Request) (name string, ok bool, err error) {
	codec, encoding, enveloped := appendCoding(r.Header)
	if codec == "" {
		return "", false, nil
	}
	head := 0
	if enveloped {
		head = 5
	}
	if plain := encoding == "" || encoding == "identity"; plain && r.ContentLength >= 0 && r.ContentLength <= int64(head+sniffPrefix) {
		return "", false, nil // it fits: nothing to read ahead
	}
	raw := make([]byte, head+sniffPrefix+1)
	n, rerr := io.ReadFull(r.Body, raw)
	raw = raw[:n]
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(raw), r.Body), r.Body}
	if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) && !errors.Is(rerr, io.EOF) {
		return "", false, nil // the handler reads the error again
	}
	msg, complete := raw, n < len(raw)
	if enveloped {
		if n < 5 {
			return "", false, nil
		}
		size := int(binary.BigEndian.Uint32(raw[1:5]))
		if raw[0]&1 == 0 {
			encoding = ""
		}
		msg = raw[5:]
		if size <= len(msg) {
			msg, complete = msg[:size], true
		}
	}
	return sniffMessage(codec, encoding, msg, complete)
}

// sniffMessage is the stream an append message names first, read from
// msg, its first bytes as sent (complete: all of them), inflated up to
// sniffPrefix when gzipped; ok is false when the whole message fits in
// sniffPrefix (the stash's check does) or when its encoding is not one the
// server reads (Connect refuses it).
func sniffMessage(codec, encoding string, msg []byte, complete bool) (name string, ok bool, err error) {
	switch encoding {
	case "", "identity":
	case "gzip":
		zr, zerr := gzip.NewReader(bytes.NewReader(msg))
		if zerr != nil {
			return "", false, nil // Connect answers it
		}
		out := make([]byte, sniffPrefix+1)
		k, zerr := io.ReadFull(zr, out)
		if errors.Is(zerr, io.ErrUnexpectedEOF) || errors.Is(zerr, io.EOF) {
			// Inflated to its end, or to the end of the bytes read.
			complete = complete && k < len(out)
		} else if zerr != nil {
			return "", false, nil
		} else {
			complete = false
		}
		msg = out[:k]
	default:
		return "", false, nil
	}
	if complete && len(msg) <= sniffPrefix {
		return "", false, nil
	}
	if codec == "proto" {
		name, err = protoFirstStream(msg)
	} else {
		name, err = jsonFirstStream(msg)
	}
	if err != nil {
		return "", false, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return name, true, nil
}

// protoFirstStream is the stream of an encoded AppendRequest prefix whose
// first field must be the stream (field 1, bytes).
func protoFirstStream(b []byte) (string, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return "", fmt.Errorf("%w (protobuf field 1, before the records)", ErrStreamNotFirst)
	}
	v, k := protowire.ConsumeBytes(b[n:])
	if k < 0 {
		return "", fmt.Errorf("%w: protobuf stream field: %v", ErrMalformedAppend, protowire.ParseError(k))
	}
	return string(v), nil
}

// jsonFirstStream is the stream of a JSON AppendRequest prefix whose first
// member must be "stream".
func jsonFirstStream(b []byte) (string, error) {
	notFirst := fmt.Errorf(`%w (the object's first member, "stream", before "records")`, ErrStreamNotFirst)
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return "", fmt.Errorf("%w: JSON: not an object", ErrMalformedAppend)
	}
	i = skipSpace(b, i+1)
	end := jsonValueEnd(b, i)
	if i == len(b) || b[i] != '"' || end < 0 || !isStreamKey(b[i:end]) {
		return "", notFirst
	}
	if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
		return "", notFirst
	}
	i = skipSpace(b, i+1)
	end = jsonValueEnd(b, i)
	if end < 0 {
		return "", notFirst
	}
	var name string
	switch v := b[i:end]; {
	case string(v) == "null":
	case v[0] == '"':
		if err := json.Unmarshal(v, &name); err != nil {
			return "", fmt.Errorf("%w: JSON: the stream: %v", ErrMalformedAppend, err)
		}
	default:
		return "", fmt.Errorf("%w: JSON: the stream is not a string", ErrMalformedAppend)
	}
	return name, nil
}
