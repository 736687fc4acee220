package injector

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// The in-cluster defaults of a pod's service account (its projected
// volume) and of the apiserver's address.
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	defaultTokenFile  = serviceAccountDir + "/token"
	defaultCAFile     = serviceAccountDir + "/ca.crt"
	namespaceFile     = serviceAccountDir + "/namespace"
)

// defaultAPIServer is the apiserver's URL from the environment the kubelet
// gives every pod; "" outside a cluster.
func defaultAPIServer() string {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return ""
	}
	return "https://" + net.JoinHostPort(host, port)
}

// kube is the injector's client of the apiserver: JSON over HTTPS with its
// service account's token, read again for every call (the kubelet rotates
// a projected token). It makes only the calls the injector's RBAC allows
// (deploy/components/injector/rbac.yaml).
type kube struct {
	base      string // https://host:port
	tokenFile string
	http      *http.Client
}

// callTimeout bounds one call to the apiserver; a watch is bounded by its
// own timeoutSeconds instead.
const callTimeout = 10 * time.Second

// newKube returns a client of the apiserver at base, trusting the PEM
// certificates of caFile.
func newKube(base, tokenFile, caFile string) (*kube, error) {
	if base == "" {
		return nil, errors.New("no apiserver: not in a pod (KUBERNETES_SERVICE_HOST unset); give -apiserver")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("the apiserver's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the apiserver's CA: no PEM certificate in %s", caFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Proxy: nil, MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: callTimeout}
	return &kube{base: strings.TrimSuffix(base, "/"), tokenFile: tokenFile, http: &http.Client{Transport: tr}}, nil
}

// apiError is an answer of the apiserver other than 2xx: its status and
// its Status object's message.
type apiError struct {
	Code    int
	Message string
	Reason  string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("apiserver: %d %s: %s", e.Code, e.Reason, e.Message)
}

// isStatus reports whether err is an apiError of code.
func isStatus(err error, code int) bool {
	ae, ok := errors.AsType[*apiError](err)
	return ok && ae.Code == code
}

// open sends one request and returns the response of a 2xx answer, for
// the caller to read and close; another answer is an *apiError.
func (k *kube) open(ctx context.Context, method, path, contentType string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, rd)
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(k.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("the service account's token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var st struct{ Message, Reason string }
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st)
	return nil, &apiError{Code: resp.StatusCode, Message: st.Message, Reason: st.Reason}
}

// do sends one request bounded by callTimeout and decodes a 2xx answer
// into out (unless nil).
func (k *kube) do(ctx context.Context, method, path, contentType string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := k.open(ctx, method, path, contentType, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the answer: %w", method, path, err)
	}
	return nil
}
