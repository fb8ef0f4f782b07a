package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/star"
)

// Standard gRPC tooling beside the API: server reflection (v1 and
// v1alpha, so grpcurl and grpcui list and describe the service without the
// .proto) and the standard health protocol (grpc.health.v1.Health/Check).
// Both answer without a token: reflection describes only the public
// schema, and health checkers (load balancers, grpc_health_probe) carry no
// credentials. Both are bounded by Limits like every other call.

// toolingPaths are the path prefixes served without authentication.
var toolingPaths = []string{
	"/" + grpcreflect.ReflectV1ServiceName + "/",
	"/" + grpcreflect.ReflectV1AlphaServiceName + "/",
	"/" + grpchealth.HealthV1ServiceName + "/",
}

// mountTooling adds the reflection and health handlers to mux.
func (s *Server) mountTooling(mux *http.ServeMux, opts ...connect.HandlerOption) {
	r := grpcreflect.NewStaticReflector(strandv1connect.StrandServiceName, grpchealth.HealthV1ServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(r, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r, opts...))
	mux.Handle(grpchealth.NewHandler(starChecker{s.cfg.Star}, opts...))
}

// isTooling reports whether a request path is a tooling call.
func isTooling(urlPath string) bool {
	for _, p := range toolingPaths {
		if strings.HasPrefix(urlPath, p) {
			return true
		}
	}
	return false
}

// starChecker answers the gRPC health protocol from star.Health: SERVING
// while the star has started, leads every chain and no epoch is halted;
// NOT_SERVING otherwise (stop sending it traffic). It is stricter than
// /healthz, which stays 200 through a halt shorter than --halt-wait (the
// star recovers in-process; replacing it would not help), because a
// halted chain acknowledges nothing until it recovers. Service "" (the
// whole server) and "strand.v1.StrandService" are known; any other name
// is NotFound, as the protocol asks.
type starChecker struct{ st *star.Star }

// ErrUnknownService: a health check for a service this server does not
// serve.
var ErrUnknownService = errors.New("server: unknown service")

func (c starChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != strandv1connect.StrandServiceName {
		return nil, connect.NewError(connect.CodeNotFound,
			fmt.Errorf("%w %q: ask for \"\" or %q", ErrUnknownService, req.Service, strandv1connect.StrandServiceName))
	}
	return &grpchealth.CheckResponse{Status: healthStatus(c.st.Health())}, nil
}

// healthStatus maps the star's state to the gRPC health status.
func healthStatus(h star.Health) grpchealth.Status {
	if !h.OK() {
		return grpchealth.StatusNotServing
	}
	for _, c := range h.Chains {
		if c.Halted != nil {
			return grpchealth.StatusNotServing
		}
	}
	return grpchealth.StatusServing
}
