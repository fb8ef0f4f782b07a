package stack

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// withKafka: two stars (each a leader and a standby) with the Kafka front
// end, TLS at a public load balancer.
func withKafka(t *testing.T) *synthesized {
	return synth(t, "kafka", map[string]any{
		CtxStarCount: float64(2), CtxPublicAPI: true, CtxCertificateARN: testCertificate, CtxAPIHostname: "api.example.com",
		CtxKafka: "true",
	})
}

// listenerPorts maps each load balancer listener's port to the logical id
// of the target group it forwards to, and its properties.
func listenerPorts(t *testing.T, s *synthesized) map[int]map[string]any {
	t.Helper()
	out := map[int]map[string]any{}
	for id, r := range s.ofType("AWS::ElasticLoadBalancingV2::Listener") {
		p := props(r)
		port, ok := p["Port"].(float64)
		if !ok {
			t.Fatalf("%s: port %v", id, p["Port"])
		}
		out[int(port)] = p
	}
	return out
}

// forwardsTo is the target group a listener's one forward action names.
func forwardsTo(t *testing.T, l map[string]any) string {
	t.Helper()
	acts, _ := l["DefaultActions"].([]any)
	if len(acts) != 1 {
		t.Fatalf("listener %v: %d actions, want one forward", l["Port"], len(acts))
	}
	ref, _ := acts[0].(map[string]any)["TargetGroupArn"].(map[string]any)
	id, _ := ref["Ref"].(string)
	if id == "" {
		t.Fatalf("listener %v: action %v names no target group", l["Port"], acts[0])
	}
	return id
}

// kafkaGroupsOf maps each star id to the target groups its service
// registers its Kafka port with.
func kafkaGroupsOf(s *synthesized) map[string][]string {
	out := map[string][]string{}
	for _, r := range s.ofType("AWS::ECS::Service") {
		p := props(r)
		lbs, _ := p["LoadBalancers"].([]any)
		for _, lb := range lbs {
			m := lb.(map[string]any)
			if m["ContainerPort"] == float64(KafkaPort) {
				ref := m["TargetGroupArn"].(map[string]any)["Ref"].(string)
				out[fmt.Sprint(p["ServiceName"])] = append(out[fmt.Sprint(p["ServiceName"])], ref)
			}
		}
	}
	return out
}

// TestKafkaOffByDefault: without strand:kafka the template has no Kafka
// listener, port, rule or variable (the stack is what it was).
func TestKafkaOffByDefault(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), withTLS(t)} {
		if s.cfg.Kafka {
			t.Fatalf("strand:kafka is on by default")
		}
		for port := range listenerPorts(t, s) {
			if port >= KafkaPort {
				t.Errorf("listener on port %d without strand:kafka", port)
			}
		}
		if len(kafkaGroupsOf(s)) != 0 {
			t.Errorf("services register a Kafka port without strand:kafka: %v", kafkaGroupsOf(s))
		}
		for _, typ := range []string{"AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress", "AWS::EC2::SecurityGroup", "AWS::ECS::TaskDefinition"} {
			for id, r := range s.ofType(typ) {
				if j := js(r); strings.Contains(j, fmt.Sprint(KafkaPort)) || strings.Contains(j, "KAFKA") {
					t.Errorf("%s: Kafka without strand:kafka: %s", id, j)
				}
			}
		}
	}
}

// TestKafkaListeners: a TLS bootstrap listener on KafkaPort reaches every
// star, and star i's own listener (the broker it advertises) only star
// i; the targets are the tasks' Kafka port, health-checked by a TCP
// connect there, which passes on a standby too: it relays the port to its
// leader (lease.Task.Relay), and ECS would replace a task failing it.
func TestKafkaListeners(t *testing.T) {
	s := withKafka(t)
	ls := listenerPorts(t, s)
	groups := kafkaGroupsOf(s)
	want := map[int][]string{KafkaPort: {}}
	for i := range s.cfg.StarCount {
		want[KafkaPort] = append(want[KafkaPort], StarID(i))
		want[KafkaListenerPort(i)] = []string{StarID(i)}
	}
	tgs := s.ofType("AWS::ElasticLoadBalancingV2::TargetGroup")
	for port, stars := range want {
		l, ok := ls[port]
		if !ok {
			t.Errorf("no listener on port %d", port)
			continue
		}
		if l["Protocol"] != "TLS" || !strings.Contains(js(l["Certificates"]), testCertificate) || l["AlpnPolicy"] != nil {
			t.Errorf("listener %d: protocol %v, certificates %v, ALPN %v; want TLS with %s and no ALPN", port, l["Protocol"], l["Certificates"], l["AlpnPolicy"], testCertificate)
		}
		tg := forwardsTo(t, l)
		var got []string
		for star, ids := range groups {
			if slices.Contains(ids, tg) {
				got = append(got, star)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, stars) {
			t.Errorf("listener %d forwards to the Kafka port of %v, want %v", port, got, stars)
		}
		p := props(tgs[tg])
		if p["Port"] != float64(KafkaPort) || p["Protocol"] != "TCP" || p["HealthCheckProtocol"] != "TCP" || p["HealthCheckPath"] != nil {
			t.Errorf("target group %s: %v; want TCP to %d with a TCP health check", tg, p, KafkaPort)
		}
		if hc, ok := p["HealthCheckPort"]; ok && hc != "traffic-port" && hc != fmt.Sprint(KafkaPort) {
			t.Errorf("target group %s: health check on port %v, want the Kafka port (a standby answers /healthz)", tg, hc)
		}
		if !strings.Contains(js(p["TargetGroupAttributes"]), `{"Key":"preserve_client_ip.enabled","Value":"true"}`) {
			t.Errorf("target group %s: client IP not preserved: %v", tg, p["TargetGroupAttributes"])
		}
	}
	for port := range ls {
		if _, ok := want[port]; port >= KafkaPort && !ok {
			t.Errorf("unexpected Kafka listener on port %d", port)
		}
	}
	// The load balancer admits clients on every Kafka port and reaches
	// the tasks on KafkaPort; the tasks admit it there.
	var lbIn []int
	tasksIn, lbOut := false, false
	for _, r := range s.ofType("AWS::EC2::SecurityGroup") {
		p := props(r)
		in, _ := p["SecurityGroupIngress"].([]any)
		for _, rule := range in {
			m := rule.(map[string]any)
			if port, ok := m["FromPort"].(float64); ok && int(port) >= KafkaPort {
				lbIn = append(lbIn, int(port))
			}
		}
		out, _ := p["SecurityGroupEgress"].([]any)
		for _, rule := range out {
			if rule.(map[string]any)["FromPort"] == float64(KafkaPort) {
				lbOut = true
			}
		}
	}
	for _, r := range s.ofType("AWS::EC2::SecurityGroupIngress") {
		p := props(r)
		if p["FromPort"] == float64(KafkaPort) && p["ToPort"] == float64(KafkaPort) && p["SourceSecurityGroupId"] != nil {
			tasksIn = true
		}
	}
	for _, r := range s.ofType("AWS::EC2::SecurityGroupEgress") {
		if props(r)["FromPort"] == float64(KafkaPort) {
			lbOut = true
		}
	}
	slices.Sort(lbIn)
	wantIn := []int{KafkaPort}
	for i := range s.cfg.StarCount {
		wantIn = append(wantIn, KafkaListenerPort(i))
	}
	if !slices.Equal(lbIn, wantIn) {
		t.Errorf("load balancer admits clients on Kafka ports %v, want %v", lbIn, wantIn)
	}
	if !tasksIn || !lbOut {
		t.Errorf("task ingress from the load balancer on %d: %v, load balancer egress there: %v", KafkaPort, tasksIn, lbOut)
	}
}

// TestKafkaEnvironment: star i listens on KafkaPort, advertises its own
// listener at the certificate's host name and names every other star at
// theirs (the brokers Metadata lists); the variables are flags of
// functions/star and the container maps the port.
func TestKafkaEnvironment(t *testing.T) {
	s := withKafka(t)
	envs := starEnv(t, s)
	for i := range s.cfg.StarCount {
		star := StarID(i)
		env := envs[star]
		if env["STRAND_KAFKA_ADDR"] != fmt.Sprintf(":%d", KafkaPort) {
			t.Errorf("%s: STRAND_KAFKA_ADDR=%v", star, env["STRAND_KAFKA_ADDR"])
		}
		// The certificate covers the host name, not the load balancer's
		// own name: the values resolve to plain strings.
		if adv, want := env["STRAND_KAFKA_ADVERTISE"], fmt.Sprintf("api.example.com:%d", KafkaListenerPort(i)); adv != want {
			t.Errorf("%s: STRAND_KAFKA_ADVERTISE=%v, want %s", star, adv, want)
		}
		peers, _ := env["STRAND_KAFKA_PEERS"].(string)
		if len(strings.Split(peers, ",")) != s.cfg.StarCount-1 {
			t.Errorf("%s: STRAND_KAFKA_PEERS=%q, want %d entries", star, peers, s.cfg.StarCount-1)
		}
		for j := range s.cfg.StarCount {
			entry := fmt.Sprintf("%s=api.example.com:%d", StarID(j), KafkaListenerPort(j))
			if has := slices.Contains(strings.Split(peers, ","), entry); has != (j != i) {
				t.Errorf("%s: STRAND_KAFKA_PEERS=%s has %s: %v, want %v", star, peers, StarID(j), has, j != i)
			}
		}
		for _, k := range []string{"STRAND_KAFKA_ADDR", "STRAND_KAFKA_ADVERTISE", "STRAND_KAFKA_PEERS"} {
			flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "STRAND_"), "_", "-"))
			if !slices.Contains(starFlags(t), flag) {
				t.Errorf("%s is not a flag of functions/star (--%s)", k, flag)
			}
		}
	}
	for id, r := range s.ofType("AWS::ECS::TaskDefinition") {
		if pm := js(props(r)["ContainerDefinitions"]); !strings.Contains(pm, fmt.Sprintf(`{"ContainerPort":%d,"Name":"kafka","Protocol":"tcp"}`, KafkaPort)) {
			t.Errorf("%s: no Kafka port mapping in %s", id, pm)
		}
	}
}

// TestKafkaConfig: strand:kafka needs TLS (SASL/PLAIN passwords are
// tokens) and fits the load balancer's listeners.
func TestKafkaConfig(t *testing.T) {
	tls := map[string]any{CtxCertificateARN: testCertificate, CtxAPIHostname: "api.example.com", CtxKafka: true}
	for _, tc := range []struct {
		name string
		vals map[string]any
		ok   bool
	}{
		{"with TLS", tls, true},
		{"no certificate", map[string]any{CtxKafka: "true"}, false},
		{"plaintext public allowed", map[string]any{CtxKafka: "true", CtxPublicAPI: true, CtxAllowPlaintextPublic: true}, false},
		{"max stars", merge(tls, map[string]any{CtxStarCount: float64(MaxKafkaStars)}), true},
		{"too many stars", merge(tls, map[string]any{CtxStarCount: float64(MaxKafkaStars + 1)}), false},
		{"many stars without Kafka", map[string]any{CtxStarCount: float64(MaxKafkaStars + 1)}, true},
	} {
		c, err := FromContext(ctx(tc.vals))
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want %v", tc.name, err, ErrConfig)
		}
		if err == nil && c.Kafka != (tc.vals[CtxKafka] != nil) {
			t.Errorf("%s: Kafka %v", tc.name, c.Kafka)
		}
	}
	// Listeners: 2 per star and 2 shared, within the load balancer's 50.
	if 2*MaxKafkaStars+2 > 50 || KafkaListenerPort(MaxKafkaStars-1) >= 65536 {
		t.Errorf("MaxKafkaStars %d does not fit a load balancer", MaxKafkaStars)
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
