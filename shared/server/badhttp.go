package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/rawjson"
)

// Requests that are not the API's get an answer that says what to send
// instead of the bare 415 (empty body) Connect gives them, and bad input in
// the HTTP framing is invalid_argument (400), not unknown (500).

// apiContentTypes are the media types the API speaks: Connect unary
// (json, proto) and streaming, gRPC and gRPC-Web. A parameter such as
// charset is allowed.
func apiContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", mt == "application/proto", mt == "application/"+rawjson.Name:
		return true
	case strings.HasPrefix(mt, "application/connect+"),
		mt == "application/grpc", strings.HasPrefix(mt, "application/grpc+"),
		mt == "application/grpc-web", strings.HasPrefix(mt, "application/grpc-web+"):
		return true
	}
	return false
}

// requireAPIRequest answers 415 with a JSON error body that says what to
// send to a POST whose Content-Type the API does not speak, and to a GET
// that is not a Connect GET (which carries ?encoding=); everything else
// passes to next.
func requireAPIRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg string
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Has("encoding"):
		case r.Method == http.MethodGet:
			msg = "a GET is not an API call: POST the request with Content-Type: application/json (a JSON body, e.g. '{}') or application/proto (protobuf)"
		case r.Method == http.MethodPost && !apiContentType(r.Header.Get("Content-Type")):
			got := r.Header.Get("Content-Type")
			if got == "" {
				got = "none"
			} else {
				got = fmt.Sprintf("%q", got)
			}
			msg = "send Content-Type: application/json (a JSON body) or application/proto (protobuf); gRPC clients send application/grpc. Got " + got
		}
		if msg == "" {
			rawFormat(next).ServeHTTP(w, r)
			return
		}
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close") // do not drain the body
		}
		w.Header().Set("Accept-Post", "application/json, application/proto")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnsupportedMediaType)
		b, _ := json.Marshal(map[string]string{"code": connect.CodeInvalidArgument.String(), "message": "server: " + msg})
		_, _ = w.Write(append(b, '\n'))
	})
}

// ErrBadBody: the request body's HTTP framing is malformed.
var ErrBadBody = errors.New("server: malformed request body")

// badFraming classifies a body read error: net/http's chunked decoder
// fails with unexported errors whose text names chunks; those are the
// client's bad input (invalid_argument), not the server's fault.
func badFraming(r *http.Request, err error) error {
	if err == nil || len(r.TransferEncoding) == 0 || !strings.Contains(err.Error(), "chunk") {
		return err
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%w: bad chunked encoding: %v", ErrBadBody, err))
}
