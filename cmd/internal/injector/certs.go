package injector

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"time"
)

// The serving certificate's life: made for certLife, made again when less
// than certRenew of it is left (at the injector's start or its next
// check).
const (
	certLife  = 5 * 365 * 24 * time.Hour
	certRenew = 30 * 24 * time.Hour
)

// servingCert is the webhook's CA and serving certificate, as its Secret
// keeps them (PEM).
type servingCert struct {
	CA, Cert, Key []byte
}

// secret is the part of a core/v1 Secret the injector reads and writes.
type secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   objectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data"` // base64 in JSON, as the API wants
}

type objectMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	UID             string            `json:"uid,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	CreationTime    string            `json:"creationTimestamp,omitempty"`
}

// ensureCert returns the serving certificate for dnsNames kept in the
// Secret namespace/name: the one there when it is valid for dnsNames for
// more than certRenew, else a new one written there. Every replica of the
// injector thus serves the same certificate, and the caBundle they write
// agrees (ensureCABundle); two replicas that make one at once settle on
// whichever the apiserver took first (a create or an update conflict
// reads the Secret again).
func ensureCert(ctx context.Context, k *kube, namespace, name string, dnsNames []string, now time.Time) (servingCert, error) {
	path := "/api/v1/namespaces/" + namespace + "/secrets/" + name
	for attempt := 0; attempt < 3; attempt++ {
		var s secret
		err := k.do(ctx, http.MethodGet, path, "", nil, &s)
		found := err == nil
		if err != nil && !isStatus(err, http.StatusNotFound) {
			return servingCert{}, err
		}
		if found {
			sc := servingCert{CA: s.Data["ca.crt"], Cert: s.Data["tls.crt"], Key: s.Data["tls.key"]}
			if sc.validFor(dnsNames, now) == nil {
				return sc, nil
			}
		}
		sc, err := newServingCert(dnsNames, now)
		if err != nil {
			return servingCert{}, err
		}
		s = secret{APIVersion: "v1", Kind: "Secret", Type: "kubernetes.io/tls",
			Metadata: objectMeta{Name: name, Namespace: namespace, ResourceVersion: s.Metadata.ResourceVersion,
				Labels: map[string]string{"app.kubernetes.io/name": "sds-proxy-injector"}},
			Data: map[string][]byte{"ca.crt": sc.CA, "tls.crt": sc.Cert, "tls.key": sc.Key}}
		if found {
			err = k.do(ctx, http.MethodPut, path, "application/json", s, nil)
		} else {
			err = k.do(ctx, http.MethodPost, "/api/v1/namespaces/"+namespace+"/secrets", "application/json", s, nil)
		}
		if err == nil {
			return sc, nil
		}
		if !isStatus(err, http.StatusConflict) {
			return servingCert{}, err
		}
		// Another replica wrote it first: read theirs.
	}
	return servingCert{}, fmt.Errorf("secret %s/%s: written by another replica at every attempt", namespace, name)
}

// validFor returns why sc cannot serve dnsNames at now for certRenew
// more, or nil.
func (sc servingCert) validFor(dnsNames []string, now time.Time) error {
	pair, err := tls.X509KeyPair(sc.Cert, sc.Key)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(sc.CA) {
		return errors.New("no CA certificate")
	}
	for _, n := range dnsNames {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: roots, CurrentTime: now.Add(certRenew)}); err != nil {
			return err
		}
	}
	return nil
}

// newServingCert makes a CA and a certificate it signs for dnsNames, each
// an ECDSA P-256 key, valid from an hour before now (clock skew) for
// certLife.
func newServingCert(dnsNames []string, now time.Time) (servingCert, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		return n
	}
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "sds-proxy injector CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLife),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return servingCert{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: slices.Clone(dnsNames),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return servingCert{}, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return servingCert{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return servingCert{}, err
	}
	return servingCert{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// webhookConfig is the part of a MutatingWebhookConfiguration the
// injector reads.
type webhookConfig struct {
	Metadata objectMeta `json:"metadata"`
	Webhooks []struct {
		Name         string `json:"name"`
		ClientConfig struct {
			CABundle []byte `json:"caBundle"` // base64 in JSON
		} `json:"clientConfig"`
	} `json:"webhooks"`
}

// ensureCABundle writes ca into the caBundle of every webhook of the
// MutatingWebhookConfiguration name whose caBundle differs, with a JSON
// Patch that first tests the configuration's resourceVersion (so a
// concurrent change is read again, not overwritten). It reports whether it
// wrote.
func ensureCABundle(ctx context.Context, k *kube, name string, ca []byte) (bool, error) {
	path := "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + name
	for attempt := 0; attempt < 3; attempt++ {
		var wc webhookConfig
		if err := k.do(ctx, http.MethodGet, path, "", nil, &wc); err != nil {
			return false, err
		}
		if len(wc.Webhooks) == 0 {
			return false, fmt.Errorf("mutatingwebhookconfiguration %s has no webhooks", name)
		}
		ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": wc.Metadata.ResourceVersion}}
		for i, w := range wc.Webhooks {
			if string(w.ClientConfig.CABundle) != string(ca) {
				ops = append(ops, map[string]any{"op": "add", "path": fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), "value": ca})
			}
		}
		if len(ops) == 1 {
			return false, nil
		}
		err := k.do(ctx, http.MethodPatch, path, "application/json-patch+json", ops, nil)
		if err == nil {
			return true, nil
		}
		// A failed test op is 422 (or 409 for a conflict): read it again.
		if !isStatus(err, http.StatusUnprocessableEntity) && !isStatus(err, http.StatusConflict) {
			return false, err
		}
	}
	return false, fmt.Errorf("mutatingwebhookconfiguration %s: changed by another writer at every attempt", name)
}
