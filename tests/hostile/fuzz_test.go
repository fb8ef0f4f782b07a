package hostile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/client"
)

// envelope frames msg as one gRPC message (flag, 4-byte length, bytes).
func envelope(msg []byte, compressed bool) []byte {
	var flag byte
	if compressed {
		flag = 1
	}
	out := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// FuzzGRPCBody sends arbitrary gRPC bodies (raw envelopes, possibly
// gzip-flagged, possibly lying about their lengths) to a streaming and the
// unary methods over h2c with a valid token: each call ends with a gRPC
// status that is not Unknown, Internal or DataLoss, within its deadline.
// (ReadSession is left out: a well-formed read of a stream tails it.)
func FuzzGRPCBody(f *testing.F) {
	e := newEnv(f, nil)
	procs := []string{"AppendSession", "Append", "ListStreams", "CheckTail", "GetStream"}
	app, _ := proto.Marshal(&strandv1.AppendRequest{Stream: e.w.Streams[0].Name, Records: []*strandv1.AppendRecord{{Body: []byte("x")}}})
	f.Add(uint8(0), envelope(app, false), false)
	f.Add(uint8(0), append(envelope(app, false), envelope(app, false)...), false)
	f.Add(uint8(0), envelope(gz(app), true), true)
	f.Add(uint8(1), envelope(gz(app), true), false) // compressed flag, no grpc-encoding
	f.Add(uint8(1), []byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2}, false)
	f.Add(uint8(2), []byte{0, 0, 0, 0}, false)
	f.Add(uint8(3), envelope([]byte{0x0a, 0x80}, false), false)
	f.Add(uint8(4), envelope(gz(make([]byte, 1<<16)), true), true)
	hc := client.NewHTTPClient()
	f.Fuzz(func(t *testing.T, p uint8, body []byte, gzipped bool) {
		proc := "/strand.v1.StrandService/" + procs[int(p)%len(procs)]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+proc, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		req.Header.Set("Authorization", "Bearer "+e.admin)
		if gzipped {
			req.Header.Set("Grpc-Encoding", "gzip")
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", proc, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		status := res.Trailer.Get("Grpc-Status")
		if status == "" {
			status = res.Header.Get("Grpc-Status") // trailers-only answer
		}
		code, err := strconv.Atoi(status)
		if err != nil {
			t.Fatalf("%s: HTTP %d without a gRPC status (%q)", proc, res.StatusCode, status)
		}
		msg := res.Trailer.Get("Grpc-Message") + res.Header.Get("Grpc-Message")
		switch {
		case code == 13 && framing(msg):
			// The gRPC spec's answer to a broken envelope (a compressed
			// flag without grpc-encoding, a bad flag, trailing bytes) is
			// Internal; Connect words it so.
		case code == 2 || code == 13 || code == 15: // Unknown, Internal, DataLoss
			t.Fatalf("%s: gRPC status %d: %s", proc, code, msg)
		}
	})
}

// framing reports whether an Internal status is Connect's for a broken
// envelope rather than the server's own.
func framing(msg string) bool {
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	return strings.HasPrefix(msg, "protocol error") || strings.HasPrefix(msg, "corrupt response")
}
