package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
)

// RedisCluster is a Redis Cluster of masters only (no replicas), each in
// its own container on its own port of 127.0.0.1, with the 16384 slots
// split evenly between them. Methods are safe for concurrent use.
type RedisCluster struct {
	ctrs  containers
	ports []int
}

// clusterBusOffset is how far above a node's port its cluster bus listens.
const clusterBusOffset = 10000

// StartRedisCluster starts a Redis Cluster of masters master nodes
// (cluster-enabled, no persistence, no replicas), in parallel, gives node i
// the i-th of masters even ranges of slots (CLUSTER ADDSLOTSRANGE), joins
// them (CLUSTER MEET) and waits until every node reports cluster_state:ok
// with all 16384 slots covered and every node known. Each node's port p
// and its bus port p+10000 are both free on 127.0.0.1 and below the
// kernel's ephemeral range. On error, the containers already started are
// terminated.
func StartRedisCluster(ctx context.Context, masters int) (*RedisCluster, error) {
	if err := checkEnv(); err != nil {
		return nil, err
	}
	if masters < 1 {
		return nil, fmt.Errorf("integration: a cluster needs at least one master, got %d", masters)
	}
	if _, err := testcontainers.NewDockerProvider(); err != nil {
		return nil, dockerMissing(err)
	}
	ports, err := freePortPairs(masters, clusterBusOffset)
	if err != nil {
		return nil, err
	}
	rc := &RedisCluster{ports: ports}
	starts := make([]func() error, masters)
	for i, port := range ports {
		starts[i] = func() error {
			return rc.ctrs.run(ctx, fmt.Sprintf("cluster node %d on port %d", i, port), readyLog,
				testcontainers.WithCmd(serverArgs(port,
					"--cluster-enabled", "yes",
					"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
					"--cluster-node-timeout", "5000")...))
		}
	}
	if err := parallel(starts...); err != nil {
		_ = rc.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := rc.join(ctx); err != nil {
		_ = rc.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return rc, nil
}

// join assigns the slots, introduces the nodes to node 0 and waits until
// the cluster is whole.
func (rc *RedisCluster) join(ctx context.Context) error {
	const slots = 16384
	n := len(rc.ports)
	for i, a := range rc.Addrs() {
		c := adminClient(a, nil)
		err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*slots/n, (i+1)*slots/n-1).Err()
		if err == nil && i > 0 {
			err = c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(rc.ports[0])).Err()
		}
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("integration: cluster node %d (%s): %w", i, a, err)
		}
	}
	for i, a := range rc.Addrs() {
		if err := poll(ctx, fmt.Sprintf("cluster node %d (%s) ok", i, a), func(ctx context.Context) error {
			c := adminClient(a, nil)
			defer func() { _ = c.Close() }()
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{
				"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384",
				"cluster_known_nodes:" + strconv.Itoa(n), "cluster_size:" + strconv.Itoa(n),
			} {
				if !strings.Contains(info, want+"\r\n") {
					return fmt.Errorf("CLUSTER INFO lacks %s:\n%s", want, info)
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// freePortPairs finds n ports p, each with p+offset also free, on
// 127.0.0.1, below the kernel's ephemeral range (32768 and up by default)
// so that no outgoing connection takes one meanwhile.
func freePortPairs(n, offset int) ([]int, error) {
	const lo, hi = 15000, 22000 // p+offset stays below 32768
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	listen := func(p int) bool {
		l, err := net.Listen("tcp", addr(p))
		if err != nil {
			return false
		}
		ls = append(ls, l)
		return true
	}
	out := make([]int, 0, n)
	for try := 0; len(out) < n; try++ {
		if try == 1000 {
			return nil, fmt.Errorf("integration: no %d free port pairs (p, p+%d) in [%d, %d)", n, offset, lo, hi)
		}
		p := lo + mrand.IntN(hi-lo)
		if slices.Contains(out, p) || slices.Contains(out, p+offset) || slices.Contains(out, p-offset) {
			continue
		}
		if listen(p) && listen(p+offset) && claim(p, p+offset) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Addrs returns every node's address, host:port on 127.0.0.1.
func (rc *RedisCluster) Addrs() []string {
	out := make([]string, len(rc.ports))
	for i, p := range rc.ports {
		out[i] = addr(p)
	}
	return out
}

// Client returns a new cluster client seeded with every node's address.
// opts may be nil; it is copied, and its Addrs are replaced. The caller
// closes it.
func (rc *RedisCluster) Client(opts *redis.ClusterOptions) *redis.ClusterClient {
	return rc.ClientSeeded(opts, rc.Addrs()...)
}

// ClientSeeded returns a new cluster client seeded with the given
// addresses only (it discovers the other nodes from them), as a process
// configured with a subset of the nodes would have. opts may be nil; it is
// copied, and its Addrs are replaced. The caller closes it.
func (rc *RedisCluster) ClientSeeded(opts *redis.ClusterOptions, addrs ...string) *redis.ClusterClient {
	o := &redis.ClusterOptions{}
	if opts != nil {
		*o = *opts
	}
	o.Addrs = slices.Clone(addrs)
	return redis.NewClusterClient(o)
}

// Close terminates every node's container.
func (rc *RedisCluster) Close(ctx context.Context) error { return rc.ctrs.terminate(ctx) }

// TLSNode is one Redis node that serves TLS only (no plain port), with a
// certificate for 127.0.0.1 signed by a CA made for it alone. Clients are
// not asked for certificates. Methods are safe for concurrent use.
type TLSNode struct {
	ctrs containers
	port int
	ca   *x509.Certificate
}

// StartTLS generates a CA and a server certificate for 127.0.0.1 (ECDSA
// P-256, valid for a day), copies them into a new container and runs Redis
// there with TLS on its own port of 127.0.0.1 and no plain port
// (--port 0 --tls-port p --tls-auth-clients no). It returns once the node
// answers PING over TLS. On error, the container is terminated.
func StartTLS(ctx context.Context) (*TLSNode, error) {
	if err := checkEnv(); err != nil {
		return nil, err
	}
	if _, err := testcontainers.NewDockerProvider(); err != nil {
		return nil, dockerMissing(err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	ca, caPEM, certPEM, keyPEM, err := newCertificates()
	if err != nil {
		return nil, err
	}
	tn := &TLSNode{port: ports[0], ca: ca}
	file := func(name string, data []byte) testcontainers.ContainerFile {
		// 0644: the image may run Redis as another user than the files'
		// owner (redis:7-alpine does); the key is a throwaway.
		return testcontainers.ContainerFile{Reader: bytes.NewReader(data), ContainerFilePath: "/tmp/tls/" + name, FileMode: 0o644}
	}
	args := []string{
		"--port", "0", "--tls-port", strconv.Itoa(tn.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--tls-cert-file", "/tmp/tls/server.crt", "--tls-key-file", "/tmp/tls/server.key",
		"--tls-ca-cert-file", "/tmp/tls/ca.crt", "--tls-auth-clients", "no",
	}
	err = tn.ctrs.run(ctx, fmt.Sprintf("TLS node on port %d", tn.port), readyLog,
		testcontainers.WithCmd(args...),
		testcontainers.WithFiles(file("ca.crt", caPEM), file("server.crt", certPEM), file("server.key", keyPEM)))
	if err == nil {
		err = pingEach(ctx, []string{tn.Addr()}, tn.ClientTLS())
	}
	if err != nil {
		_ = tn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return tn, nil
}

// newCertificates makes a CA and a server certificate for 127.0.0.1 that
// it signs, returning the CA and the PEM of the CA, the certificate and its
// key (PKCS #8).
func newCertificates() (ca *x509.Certificate, caPEM, certPEM, keyPEM []byte, err error) {
	wrap := func(err error) error { return fmt.Errorf("integration: TLS certificates: %w", err) }
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redlock integration test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return ca, caPEM, certPEM, keyPEM, nil
}

// Addr returns the node's TLS address, host:port on 127.0.0.1.
func (tn *TLSNode) Addr() string { return addr(tn.port) }

// ClientTLS returns a new client TLS configuration that trusts the node's
// CA (and nothing else) and verifies the certificate for 127.0.0.1.
func (tn *TLSNode) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(tn.ca)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// CAPEM returns the node's CA certificate, PEM-encoded, for programs
// told where to find their roots (SSL_CERT_FILE).
func (tn *TLSNode) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tn.ca.Raw})
}

// UntrustedTLS returns a new client TLS configuration that trusts no CA at
// all: every handshake with the node fails verifying its certificate
// ("x509: certificate signed by unknown authority"), as with a client
// given the wrong CA.
func (tn *TLSNode) UntrustedTLS() *tls.Config {
	return &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// Close terminates the node's container.
func (tn *TLSNode) Close(ctx context.Context) error { return tn.ctrs.terminate(ctx) }
