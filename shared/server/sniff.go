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
// that fits in the prefix is checked as before, from the stash.

// sniffPrefix is the most of an Append's message, decompressed, read
// before its stream is authorized.
const sniffPrefix = 64 << 10

// ErrStreamNotFirst: an append longer than sniffPrefix whose message does
// not name its stream first, or names another stream later.
var ErrStreamNotFirst = errors.New("server: an append over 64 KiB must name its stream first")

// sniffedKey is the context key of the stream an Append's message named
// first (sniffAppend), when it was read before the body.
type sniffedKey struct{}

// sniffedStream is the stream ctx's Append named first, if read so.
func sniffedStream(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(sniffedKey{}).(string)
	return s, ok
}

// authorizeSniffed reads the first bytes of an Append's body and
// authorizes the call's grant to append to the stream its message names
// first; it returns r with the whole body and that stream in its context,
// or a Connect error to answer. Requests it cannot read a stream from
// (a short message, a codec or encoding Connect will refuse) pass as
// they are.
func authorizeSniffed(r *http.Request) (*http.Request, error) {
	name, ok, err := sniffAppend(r)
	if err != nil {
		return r, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if !ok {
		return r, nil
	}
	if g, authed := auth.FromContext(r.Context()); authed {
		if err := checkName(name); err != nil {
			return r, err
		}
		if err := g.Allow(auth.Append, name); err != nil {
			return r, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w on stream %q", err, name))
		}
	}
	return r.WithContext(context.WithValue(r.Context(), sniffedKey{}, name)), nil
}

// sniffAppend reads up to sniffPrefix bytes of r's message (its body; with
// gRPC, the first envelope's), inflates them when gzipped, and returns
// the stream the message names first; ok is false when the whole message
// fit (the stash's check does) or when it is not one the server decodes.
// r.Body is given back whole.
func sniffAppend(r *http.Request) (name string, ok bool, err error) {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(strings.ToLower(ct))
	enveloped, codec, encoding := false, "", r.Header.Get("Content-Encoding")
	switch {
	case strings.HasPrefix(ct, "application/grpc"):
		enveloped, codec, encoding = true, "proto", r.Header.Get("Grpc-Encoding")
		if i := strings.IndexByte(ct, '+'); i >= 0 {
			codec = ct[i+1:]
		}
	case strings.HasPrefix(ct, "application/"):
		codec = strings.TrimPrefix(ct, "application/")
	}
	if codec == rawjson.Name {
		codec = "json"
	}
	if codec != "proto" && codec != "json" {
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
	return name, err == nil, err
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
