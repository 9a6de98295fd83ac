package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/daemon/config"
)

// certStore holds the listener's certificate: loaded at start from
// tlsCert and tlsKey, loaded again at SIGHUP (reload), handed to each TLS
// handshake by GetCertificate. A handshake under way keeps the
// certificate it got.
type certStore struct {
	mu       sync.Mutex // guards cert, certFile, keyFile
	cert     *tls.Certificate
	certFile string
	keyFile  string
}

// loadCert reads a certificate (chain) and its key, both PEM, and checks
// that the certificate is valid now.
func loadCert(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsCert %s, tlsKey %s: %w", certFile, keyFile, err)
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tlsCert %s: %w", certFile, err)
		}
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("tlsCert %s: expired on %s", certFile, leaf.NotAfter.UTC().Format(time.DateOnly))
	}
	return &c, nil
}

// newCertStore loads the files of cfg; nil (and no error) without TLS.
func newCertStore(cfg config.Config) (*certStore, error) {
	if !cfg.TLS() {
		return nil, nil
	}
	c, err := loadCert(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	return &certStore{cert: c, certFile: cfg.TLSCert, keyFile: cfg.TLSKey}, nil
}

// reload loads the files of cfg (the paths may have changed) and uses
// them from the next handshake on; on error the certificate in use stays.
// It reports whether the certificate changed.
func (s *certStore) reload(cfg config.Config) (bool, error) {
	if !cfg.TLS() {
		return false, errors.New("tlsCert and tlsKey were removed: TLS stays on until a restart")
	}
	c, err := loadCert(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := !sameCert(s.cert, c)
	s.cert, s.certFile, s.keyFile = c, cfg.TLSCert, cfg.TLSKey
	return changed, nil
}

func sameCert(a, b *tls.Certificate) bool {
	if len(a.Certificate) != len(b.Certificate) {
		return false
	}
	for i := range a.Certificate {
		if string(a.Certificate[i]) != string(b.Certificate[i]) {
			return false
		}
	}
	return true
}

// tlsConfig is the listener's configuration: the store's certificate.
func (s *certStore) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.cert, nil
		},
	}
}

// loopbackOnly reports whether a listener bound to addr (host:port) is
// reachable from this machine only: a loopback IP or localhost. An empty
// or unspecified host (all interfaces) and any other address are not.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// insecureListenMessage is why a non-loopback listener without TLS is
// refused, and the ways out.
func insecureListenMessage(addr string) string {
	return fmt.Sprintf("listen %s: refusing to serve shells and tokens over plain HTTP beyond this machine. "+
		"Either serve TLS here (--tls-cert FILE --tls-key FILE, config tlsCert and tlsKey), "+
		"or keep ahpd on loopback (--listen 127.0.0.1:7681) behind a proxy that terminates TLS (--public-url https://…; README, \"Running behind a proxy\"); "+
		"--insecure-listen (config insecureListen = true) serves plain HTTP there anyway", addr)
}

// checkListener is what --check-config adds to the file's checks: the
// TLS files load, and a listener beyond loopback has TLS or
// insecureListen, as at start (socket activation's listener aside, which
// only the start sees).
func checkListener(cfg config.Config) error {
	cfg = cfg.WithDefaults()
	if cfg.TLS() {
		if _, err := loadCert(cfg.TLSCert, cfg.TLSKey); err != nil {
			return err
		}
	} else if !cfg.InsecureListen && !loopbackOnly(cfg.Listen) {
		return errors.New(insecureListenMessage(cfg.Listen))
	}
	return nil
}
