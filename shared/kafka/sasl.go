package kafka

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
)

// mechPlain is the one SASL mechanism served: PLAIN, the password a strand
// token (the user name is not checked; it shows in logs).
const mechPlain = "PLAIN"

// ErrSASL: a SASL exchange that does not parse.
var ErrSASL = errors.New("kafka: malformed SASL/PLAIN message")

func (cn *conn) saslHandshake(r *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = []string{mechPlain}
	if r.Mechanism != mechPlain {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp
	}
	cn.mech = mechPlain
	return resp
}

// ParsePlain splits a SASL/PLAIN message: [authzid] NUL authcid NUL
// password (RFC 4616).
func ParsePlain(b []byte) (user, password string, err error) {
	parts := bytes.Split(b, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", fmt.Errorf("%w: want authzid NUL user NUL password", ErrSASL)
	}
	return string(parts[1]), string(parts[2]), nil
}

// saslAuthenticate checks the PLAIN password as a strand token; on
// success the connection acts with the token's grant. A failure answers
// SASL_AUTHENTICATION_FAILED; the client is expected to close, and any
// other request on the connection closes it.
func (cn *conn) saslAuthenticate(r *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	fail := func(err error) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, message(err)
		cn.s.log.Info("kafka: SASL authentication failed", "remote", cn.remote, "err", err.Error())
		return resp, nil
	}
	if cn.mech != mechPlain {
		return nil, fmt.Errorf("%w: SaslAuthenticate before a PLAIN handshake", ErrRequest)
	}
	user, password, err := ParsePlain(r.SASLAuthBytes)
	if err != nil {
		return fail(err)
	}
	if cn.s.cfg.Auth == nil {
		cn.authed = true
		cn.slot.authed.Store(true)
		return resp, nil
	}
	g, err := cn.s.cfg.Auth.CheckFrom(cn.s.ctx, password, auth.Source(cn.remote))
	if err != nil {
		return fail(fmt.Errorf("user %q: %w", user, err))
	}
	if err := cn.s.charge(cn.slot, g.Tenant); err != nil {
		return fail(err)
	}
	cn.ctx, cn.authed, cn.token = auth.WithGrant(cn.s.ctx, g), true, password
	cn.slot.authed.Store(true)
	return resp, nil
}

// recheck looks the connection's token up again before a request (the
// checker's cache makes that free): a token revoked or expired since the
// handshake ends the connection, as it would end an API call.
func (cn *conn) recheck() error {
	if cn.token == "" || cn.s.cfg.Auth == nil {
		return nil
	}
	g, err := cn.s.cfg.Auth.CheckFrom(cn.s.ctx, cn.token, auth.Source(cn.remote))
	if err != nil {
		return fmt.Errorf("%w: the SASL token: %w", ErrRequest, err)
	}
	cn.ctx = auth.WithGrant(cn.s.ctx, g)
	return nil
}
