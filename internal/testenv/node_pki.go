package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// nodePKI is the node's certificates: the API server's serving certificate,
// which must name the kubernetes Service's address that pods dial (envtest's
// names loopback alone), the ServiceAccount signer, and the API server's
// client certificate for the kubelet (logs, exec).
type nodePKI struct {
	caPEM []byte
	// The files, each in the API server's certificate folder.
	clientCert, clientKey, caFile string
}

// writeNodePKI writes the certificates into dir under the names envtest
// reads (apiserver.crt/.key, sa-signer.crt/.key), with serving names for
// the addresses ips.
func writeNodePKI(dir string, ips ...net.IP) (nodePKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nodePKI{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "delivery-node-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nodePKI{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nodePKI{}, err
	}
	p := nodePKI{
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caFile: filepath.Join(dir, "node-ca.crt"), clientCert: filepath.Join(dir, "kubelet-client.crt"),
		clientKey: filepath.Join(dir, "kubelet-client.key"),
	}
	if err := os.WriteFile(p.caFile, p.caPEM, 0o600); err != nil {
		return nodePKI{}, err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
	}
	if err := writeSigned(dir, "apiserver", serving, ca, caKey); err != nil {
		return nodePKI{}, err
	}
	// The API server's client name towards the kubelet: a member of
	// system:masters, so the kubelet's webhook authoriser lets it read logs.
	client := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := writeSigned(dir, "kubelet-client", client, ca, caKey); err != nil {
		return nodePKI{}, err
	}
	signer := &x509.Certificate{
		SerialNumber: big.NewInt(4), Subject: pkix.Name{CommonName: "service-account-signer"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	signerKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nodePKI{}, err
	}
	if err := writePair(dir, "sa-signer", signer, signer, signerKey, signerKey); err != nil {
		return nodePKI{}, err
	}
	return p, nil
}

// writeSigned writes a new key and tmpl signed by ca as <name>.crt and .key.
func writeSigned(dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	return writePair(dir, name, tmpl, ca, key, caKey)
}

func writePair(dir, name string, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) error {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}
