package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/kafka"
	"github.com/strandlog/strand/shared/server"
)

// KafkaConfig is the star's Kafka front end (shared/kafka, docs/kafka.md).
type KafkaConfig struct {
	// Addr is the Kafka listen address ("": no Kafka front end).
	Addr string
	// Advertise is the host:port clients reach it at ("": Addr as bound).
	Advertise string
	// Brokers maps the other stars' ids to their Kafka host:port.
	Brokers map[string]string
	// AnonymousLoopback admits clients on loopback without SASL, as an
	// admin (strand dev).
	AnonymousLoopback bool
	// AutoCreateTopics: Metadata creates missing topics clients ask for
	// (kafka.Config.AutoCreateTopics; strand dev).
	AutoCreateTopics bool
	// Optional: when Addr cannot be bound, log a warning and run without
	// the front end (strand dev's default address; an address given
	// explicitly must bind).
	Optional bool
	// BindWait: while Addr is in use, keep trying to bind it this long
	// (every kafkaBindRetry) before giving up as Optional says. A standby
	// that takes over from a leader that just died binds the port the
	// leader's socket held until the kernel released it (strand dev
	// --standby). Zero: one try.
	BindWait time.Duration
	// Limits bound what clients make the front end hold (zero fields:
	// kafka's defaults); BindLimitFlags binds them to --kafka-* flags,
	// and Start refuses a set that cannot work (ErrKafkaLimit).
	Limits kafka.Limits
}

// kafkaBindRetry is how often a taken Kafka address is tried again within
// KafkaConfig.BindWait.
const kafkaBindRetry = 20 * time.Millisecond

// listenWhenFree listens on addr, trying again every kafkaBindRetry for up
// to wait while the address is in use; any other error ends it at once.
func listenWhenFree(addr string, wait time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(wait)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !time.Now().Before(deadline) {
			return ln, err
		}
		time.Sleep(kafkaBindRetry)
	}
}

// listenKafka binds the Kafka address (nil: none configured, or an
// optional one taken). Start binds it before the star takes over: a
// client that reconnects meanwhile waits in the listen backlog until the
// front end serves, where a refused dial would send kgo to a metadata
// refresh behind its 5 s min age (ADR 0071).
func (n *Node) listenKafka(cfg Config) (net.Listener, error) {
	kc := cfg.Kafka
	if kc.Addr == "" {
		return nil, nil
	}
	ln, err := listenWhenFree(kc.Addr, kc.BindWait)
	if err != nil && kc.Optional {
		n.log.Warn("no Kafka front end: its address is taken (pass --kafka-addr to pick another)", "addr", kc.Addr, "waited", kc.BindWait.String(), "err", err.Error())
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listen for Kafka on %s: %w (is a Kafka broker or another strand running there? pick another address, or --kafka-addr '' for none)", kc.Addr, err)
	}
	return ln, nil
}

// startKafka serves the Kafka front end on ln (listenKafka's; nil: none)
// over the API server srv, with the API's token checker (nil: no
// authentication). It closes ln if it fails.
func (n *Node) startKafka(cfg Config, ln net.Listener, srv *server.Server, checker *auth.Checker) error {
	if ln == nil {
		return nil
	}
	kc := cfg.Kafka
	if cfg.TLSCert != "" {
		// The API's certificate serves Kafka too (SASL_SSL).
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("kafka TLS: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	ks, err := kafka.New(kafka.Config{Core: srv, Auth: checker, AnonymousLoopback: kc.AnonymousLoopback, AutoCreateTopics: kc.AutoCreateTopics, Star: n.Star.ID(),
		Brokers: kc.Brokers, Advertise: kc.Advertise, Limits: kc.Limits, Clock: cfg.Star.Clock, Logger: n.log, Metrics: n.Star.Metrics()})
	if err != nil {
		ln.Close()
		return err
	}
	n.kafka, n.kafkaAddr = ks, ln.Addr().String()
	go func() {
		if err := ks.Serve(ln); err != nil {
			select {
			case n.errc <- err:
			default: // another server's failure is being reported
			}
		}
	}()
	return nil
}

// KafkaAddr is the Kafka front end's address ("" without one).
func (n *Node) KafkaAddr() string { return n.kafkaAddr }
