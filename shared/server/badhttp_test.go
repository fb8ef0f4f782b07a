package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawExchange sends req as raw bytes over HTTP/1.1 and returns the answer.
func rawExchange(t *testing.T, addr, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBadHTTPSaysWhy: requests that are not the API's (no Content-Type, a
// GET, malformed chunked encoding) get an answer that says what to send,
// and bad input is a client error (4xx), never 500. Before issue 20: a
// bare 415 with an empty body, and 500 "unknown" for bad chunking.
func TestBadHTTPSaysWhy(t *testing.T) {
	n := newNode(t, newMeta(t), "s1", true, nil)
	addr := strings.TrimPrefix(n.ts.URL, "http://")
	auth := "Authorization: Bearer " + adminTok + "\r\n"
	const path = "/strand.v1.StrandService/CheckTail"
	for _, tc := range []struct {
		name, req string
		code      int
		says      string
	}{
		{"POST without Content-Type",
			"POST " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
			415, "Content-Type: application/json"},
		{"POST with text/plain",
			"POST " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}",
			415, "Content-Type: application/json"},
		{"GET",
			"GET " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
			415, "POST"},
		{"malformed chunked encoding",
			"POST " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
			400, "chunked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawExchange(t, addr, tc.req)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Fatalf("%d %q, want %d and a body that says %q", code, body, tc.code, tc.says)
			}
		})
	}
	// What the API speaks still works, charset and all.
	code, body := rawExchange(t, addr, "POST /strand.v1.StrandService/ListStreams HTTP/1.1\r\nHost: x\r\n"+auth+
		"Content-Type: application/json; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}")
	if code != 200 {
		t.Fatalf("ListStreams: %d %s", code, body)
	}
}
