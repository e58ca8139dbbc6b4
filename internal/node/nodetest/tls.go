package nodetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// UntrustedTLSListener accepts TLS connections with a certificate no
// client trusts (self-signed, made for the test), as a node whose client
// was given the wrong CA: every client handshake fails with "x509:
// certificate signed by unknown authority". It stops, and waits for its
// handshakes, when the test ends.
func UntrustedTLSListener(tb testing.TB) string {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "untrusted node"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(tb, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(tb, err)
	return serve(tb, l, func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_ = c.(*tls.Conn).Handshake() // fails: the client rejects the certificate
	})
}

// serve runs handle on each connection l accepts, until the test ends:
// then it closes l and waits for them. It returns l's address.
func serve(tb testing.TB, l net.Listener, handle func(net.Conn)) string {
	tb.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { handle(c) })
		}
	})
	tb.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

// UntrustedTLS returns a client configuration for an UntrustedTLSListener:
// it trusts no CA at all.
func UntrustedTLS() *tls.Config {
	return &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// RefusedAddr returns an address on which nothing listens: dials to it
// are refused at once.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := l.Addr().String()
	require.NoError(tb, l.Close())
	return addr
}

// ResetListener accepts TCP connections and resets each once the client
// has sent something (a close with no linger sends RST), as a proxy whose
// server is down does: a client's dial succeeds and its first read fails
// with "connection reset by peer", and a TLS client's dial fails in its
// handshake. It stops, and waits for its connections, when the test ends.
func ResetListener(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	return serve(tb, l, func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Read(make([]byte, 1))
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	})
}
