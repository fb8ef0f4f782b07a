package server

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/rawjson"
)

// FormatHeader selects how JSON carries bytes: "raw" is rawjson (bodies,
// header names and values as UTF-8 text, base64 in FBase64 only when not
// UTF-8; 64-bit numbers as numbers; zero values present), "base64" or
// absent is the protobuf JSON mapping. It applies to JSON requests and
// their answers (Connect unary and streaming), like S2's S2-Format.
const FormatHeader = "Strand-Format"

// ErrFormat: a Strand-Format value that is neither raw nor base64.
var ErrFormat = errors.New("server: unknown Strand-Format")

// rawContentTypes maps a JSON content type to its rawjson one.
var rawContentTypes = map[string]string{
	"application/json":         "application/" + rawjson.Name,
	"application/connect+json": "application/connect+" + rawjson.Name,
}

// rawFormat turns a JSON request with Strand-Format: raw into a rawjson
// one (the codec Handler registers), so the call reads and answers raw
// JSON; a Strand-Format it does not know is invalid_argument.
func rawFormat(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch f := r.Header.Get(FormatHeader); f {
		case "", "base64":
		case "raw":
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if raw, ok := rawContentTypes[mt]; ok {
				r.Header.Set("Content-Type", raw)
			}
		default:
			_ = ew.Write(w, r, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("%w %q: send raw (bytes as UTF-8 text) or base64 (the protobuf JSON mapping; the default)", ErrFormat, f)))
			return
		}
		next.ServeHTTP(w, r)
	})
}
