package rpcauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// loadKeyPair loads a PEM certificate (chain) and its private key.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return tls.Certificate{}, errors.New("no certificate given")
	case certFile == "":
		return tls.Certificate{}, fmt.Errorf("a key (%s) needs its certificate too", keyFile)
	case keyFile == "":
		return tls.Certificate{}, fmt.Errorf("a certificate (%s) needs its key too", certFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// loadPool reads a PEM file of one or more CA certificates.
func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}
