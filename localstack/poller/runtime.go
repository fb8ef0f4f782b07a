package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrFunction is an invocation the function answered with an error (its
// handler returned one, panicked, or failed to start).
var ErrFunction = errors.New("poller: function error")

// ErrUnknownInvocation is a response for an invocation id that is not
// pending.
var ErrUnknownInvocation = errors.New("poller: unknown invocation id")

const runtimePrefix = "/2018-06-01/runtime/"

// invocation is one event handed to the function and its answer.
type invocation struct {
	id       string
	event    []byte
	deadline time.Time
	done     chan outcome
}

type outcome struct {
	body []byte
	err  error
}

// runtimeAPI serves the Lambda Runtime API
// (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html) to one
// function process, as Lambda does to a bootstrap: the process asks for the
// next invocation (GET invocation/next, which blocks until there is one)
// and posts its response or error. One invocation at a time, as one
// concurrent execution of the function.
type runtimeAPI struct {
	function string // its name, for the ARN header
	arn      string
	next     chan *invocation

	mu      sync.Mutex
	pending map[string]*invocation
	initErr error
}

func newRuntimeAPI(function, arn string) *runtimeAPI {
	return &runtimeAPI{function: function, arn: arn, next: make(chan *invocation), pending: map[string]*invocation{}}
}

// invoke hands event to the function and waits for its answer: the
// response body, or ErrFunction wrapped with the error the function
// reported. timeout is the function's (the deadline it is told).
func (r *runtimeAPI) invoke(ctx context.Context, event []byte, timeout time.Duration) ([]byte, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	inv := &invocation{id: hex.EncodeToString(b[:]), event: event, deadline: time.Now().Add(timeout), done: make(chan outcome, 1)}
	ctx, cancel := context.WithDeadline(ctx, inv.deadline.Add(5*time.Second))
	defer cancel()
	r.mu.Lock()
	r.pending[inv.id] = inv
	initErr := r.initErr
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, inv.id)
		r.mu.Unlock()
	}()
	if initErr != nil {
		return nil, fmt.Errorf("%s: %w: init: %v", r.function, ErrFunction, initErr)
	}
	select {
	case r.next <- inv:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no runtime asked for the next invocation: %w", r.function, ctx.Err())
	}
	select {
	case o := <-inv.done:
		return o.body, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: invocation %s: %w", r.function, inv.id, ctx.Err())
	}
}

func (r *runtimeAPI) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path, ok := strings.CutPrefix(req.URL.Path, runtimePrefix)
	if !ok {
		http.NotFound(w, req)
		return
	}
	switch {
	case req.Method == http.MethodGet && path == "invocation/next":
		select {
		case inv := <-r.next:
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", r.arn)
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-"+inv.id[:24])
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(inv.event)
		case <-req.Context().Done():
		}
	case req.Method == http.MethodPost && path == "init/error":
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.initErr = errors.New(string(body))
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	case req.Method == http.MethodPost && strings.HasPrefix(path, "invocation/"):
		id, kind, ok := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		if !ok || (kind != "response" && kind != "error") {
			http.NotFound(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, 6<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		inv := r.pending[id]
		r.mu.Unlock()
		if inv == nil {
			http.Error(w, ErrUnknownInvocation.Error(), http.StatusBadRequest)
			return
		}
		o := outcome{body: body}
		// A streamed response reports a late error in its trailers.
		if t := req.Trailer.Get("Lambda-Runtime-Function-Error-Type"); kind == "error" || t != "" {
			o = outcome{err: fmt.Errorf("%s: %w: %s", r.function, ErrFunction, strings.TrimSpace(string(body)+" "+t))}
		}
		select {
		case inv.done <- o:
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, req)
	}
}
