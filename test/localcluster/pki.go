package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and the keys its components
// need: the API server's serving certificate, client certificates for the
// admin and the controller manager, and the service-account signing key.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// Paths of the files newPKI writes, relative to its directory.
const (
	caCertFile     = "ca.crt"
	serverCertFile = "apiserver.crt"
	serverKeyFile  = "apiserver.key"
	adminCertFile  = "admin.crt"
	adminKeyFile   = "admin.key"
	saKeyFile      = "sa.key"
	saPubFile      = "sa.pub"
	nodeCertFile   = "kubelet-client.crt"
	nodeKeyFile    = "kubelet-client.key"
	// The API server's client certificate when it proxies a request to an
	// aggregated API server (a metrics adapter), which trusts the user it
	// names in its headers because of this certificate's name.
	proxyCertFile   = "front-proxy-client.crt"
	proxyKeyFile    = "front-proxy-client.key"
	proxyClientName = "front-proxy-client"
)

// newPKI makes a fresh CA and every key and certificate the cluster needs
// in dir. A local cluster lives for hours at most; certificates last a week.
// extraIPs are more addresses the API server answers on.
func newPKI(dir string, extraIPs []net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kvpilot-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: caCert, caKey: caKey}
	if err := p.writeCert(caCertFile, der); err != nil {
		return nil, err
	}

	// The API server answers on loopback and, inside the cluster, on the
	// first address of the service range.
	if err := p.issue(serverCertFile, serverKeyFile, pkix.Name{CommonName: "kube-apiserver"},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)}, extraIPs...), x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	// system:masters is the API server's superuser group.
	if err := p.issue(adminCertFile, adminKeyFile, pkix.Name{CommonName: "kvpilot-admin", Organization: []string{"system:masters"}},
		nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}

	if err := p.issue(proxyCertFile, proxyKeyFile, pkix.Name{CommonName: proxyClientName}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}

	// Service-account tokens are signed with RSA: every consumer accepts it.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, saKeyFile), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, saPubFile), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// issueNode issues a kubelet's client certificate: the Node authorizer
// knows it as node name by its user and group.
func (p *pki) issueNode(name string) error {
	return p.issue(nodeCertFile, nodeKeyFile, pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		nil, nil, x509.ExtKeyUsageClientAuth)
}

func (p *pki) issue(certFile, keyFile string, subject pkix.Name, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("issue %s: %w", certFile, err)
	}
	if err := p.writeCert(certFile, der); err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(p.path(keyFile), "EC PRIVATE KEY", keyDER)
}

func (p *pki) writeCert(name string, der []byte) error {
	return writePEM(p.path(name), "CERTIFICATE", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
