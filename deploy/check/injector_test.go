package check

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// writeServingCert writes a self-signed certificate for 127.0.0.1 and its
// key into dir, and returns a pool that trusts it.
func writeServingCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// startInjector runs `bin injector` with its own certificate and no
// apiserver (-tls-cert, -report=false) on 127.0.0.1, and returns the
// webhook's base URL and a client that trusts it. It stops when the test
// ends.
func startInjector(t *testing.T, bin string) (string, *http.Client) {
	t.Helper()
	dir := t.TempDir()
	pool := writeServingCert(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "injector", "-image", "registry.example/sds-proxy:1.0", "-configmap", "sds-proxy",
		"-namespace", "sds-system", "-tls-cert", filepath.Join(dir, "tls.crt"), "-tls-key", filepath.Join(dir, "tls.key"),
		"-report=false", "-listen", "127.0.0.1:0", "-health", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	// Its "serving" line names its addresses, its "ready" line says its
	// certificate is loaded; the rest of its log is drained (and kept for
	// a failure).
	type logLine struct {
		Msg         string `json:"msg"`
		WebhookAddr string `json:"webhook_addr"`
	}
	serving, ready := make(chan string, 1), make(chan struct{})
	var log bytes.Buffer
	go func() {
		defer close(serving)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			var l logLine
			if json.Unmarshal(lines.Bytes(), &l) == nil {
				switch {
				case l.Msg == "serving":
					serving <- l.WebhookAddr
				case strings.HasPrefix(l.Msg, "ready"):
					close(ready)
				}
			}
			log.Write(append(lines.Bytes(), '\n'))
		}
	}()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	var addr string
	select {
	case a, ok := <-serving:
		if !ok {
			t.Fatalf("the injector exited before serving: %s", log.String())
		}
		addr = a
	case <-timeout.C:
		t.Fatal("the injector did not log serving within 10s")
	}
	select {
	case <-ready:
	case <-timeout.C:
		t.Fatal("the injector did not log ready within 10s")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return "https://" + addr, client
}

// TestInjectorReviewDifferential: the injector's AdmissionReview answers,
// decoded strictly with k8s.io/api's own admission/v1 types, carry a JSON
// Patch that the apiserver's own JSON Patch library applies to the pod,
// and the patched pod, decoded strictly into core/v1, has the spec that
// `sds-proxy inject` gives the same pod: the webhook and inject are one
// transform, and the webhook's hand-written review types speak what the
// apiserver speaks. A second review of the patched pod patches nothing.
func TestInjectorReviewDifferential(t *testing.T) {
	t.Parallel()
	bin := buildSDSProxy(t)
	base, client := startInjector(t, bin)
	inputs, err := filepath.Glob(filepath.Join(injectTestdata, "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for _, in := range inputs {
		src, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		want := podsOf(t, runInject(t, bin, src, "inject", "-image", "registry.example/sds-proxy:1.0", "-configmap", "sds-proxy"))
		for i, pod := range podsOf(t, src) {
			pods++
			name := filepath.Base(in) + " pod " + pod.Name
			podJSON, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := admit(t, client, base+"/inject/namespace", podJSON)
			if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("%s: response %+v, want allowed with a JSON Patch", name, resp)
			}
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatalf("%s: the patch %s: %v", name, resp.Patch, err)
			}
			patched, err := patch.Apply(podJSON)
			if err != nil {
				t.Fatalf("%s: applying %s: %v", name, resp.Patch, err)
			}
			var got corev1.Pod
			if err := yaml.UnmarshalStrict(patched, &got); err != nil {
				t.Fatalf("%s: the patched pod: %v", name, err)
			}
			if !equality.Semantic.DeepEqual(got.Spec, want[i].Spec) {
				t.Errorf("%s: the webhook's pod spec differs from inject's:\n%s\nwant\n%s", name, asYAML(got.Spec), asYAML(want[i].Spec))
			}
			if got.Annotations["sds-proxy.io/injected"] == "" {
				t.Errorf("%s: annotations %v, want sds-proxy.io/injected", name, got.Annotations)
			}
			if again := admit(t, client, base+"/inject/namespace", patched); !again.Allowed || again.Patch != nil {
				t.Errorf("%s: the patched pod reviewed again: %+v, want allowed with no patch", name, again)
			}
		}
	}
	if pods < 4 {
		t.Errorf("reviewed %d pods, want the 4 or more of inject's testdata", pods)
	}
}

// podsOf returns the pods of a YAML stream: each Pod, each workload's
// template as a Pod, in order (List items included: decodeStrict
// flattens them).
func podsOf(t *testing.T, stream []byte) []corev1.Pod {
	t.Helper()
	objs, err := decodeStrict("stream", stream)
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, o := range objs {
		if meta, spec, ok := podTemplate(o); ok {
			pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: *meta, Spec: *spec}
			if pod.Name == "" {
				pod.Name = o.Name + "-template"
			}
			pods = append(pods, pod)
		}
	}
	return pods
}

// admit POSTs an admission/v1 AdmissionReview of podJSON's creation to
// url and returns its response, decoded strictly.
func admit(t *testing.T, client *http.Client, url string, podJSON []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	in := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("7c4a3e5e-0c1d-4b7b-9f8e-1d2c3b4a5f60"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "shop", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: podJSON},
		},
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("the injector answered %d: %s", resp.StatusCode, raw)
	}
	var out admissionv1.AdmissionReview
	if err := yaml.UnmarshalStrict(raw, &out); err != nil {
		t.Fatalf("the answer %s is not a strict admission/v1 AdmissionReview: %v", raw, err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != in.Request.UID {
		t.Fatalf("the answer %s: want an AdmissionReview answering uid %s", raw, in.Request.UID)
	}
	return out.Response
}

// TestInjectorManifests: deploy/injector renders to objects that decode
// strictly; the injector's pod passes the restricted Pod Security Standard
// and is kept out of injection; both webhooks fail open, have no side
// effects, skip kube-system and the injector's own namespace and call the
// paths the injector serves; and its RBAC grants no wildcard, and writes
// only its own Secret and webhook configuration.
func TestInjectorManifests(t *testing.T) {
	t.Parallel()
	out, err := render("../injector")
	if err != nil {
		t.Fatalf("kustomize build deploy/injector: %v", err)
	}
	objs, err := decodeStrict("deploy/injector", out)
	if err != nil {
		t.Fatal(err)
	}
	var deploy *appsv1.Deployment
	var hooks *admissionregistrationv1.MutatingWebhookConfiguration
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			deploy = v
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			hooks = v
		case *rbacv1.ClusterRole:
			checkRules(t, o.Kind+" "+o.Name, v.Rules)
		case *rbacv1.Role:
			checkRules(t, o.Kind+" "+o.Name, v.Rules)
		}
	}
	if deploy == nil || hooks == nil {
		t.Fatalf("deploy/injector renders no Deployment or no MutatingWebhookConfiguration")
	}
	checkRestricted(t, "the injector", &deploy.Spec.Template.ObjectMeta, &deploy.Spec.Template.Spec)
	if deploy.Spec.Template.Annotations["sds-proxy.io/inject"] != "disabled" || deploy.Namespace != "sds-system" {
		t.Errorf("the injector's pod: namespace %q, annotations %v; want sds-system, and kept out of injection", deploy.Namespace, deploy.Spec.Template.Annotations)
	}
	if img := deploy.Spec.Template.Spec.Containers[0].Image; img != "registry.example/sds-proxy:latest" {
		t.Errorf("the injector's image %q, want the component's registry.example/sds-proxy:latest", img)
	}
	paths := map[string]bool{}
	for _, w := range hooks.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore || w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s: failurePolicy %v, sideEffects %v; want Ignore and None", w.Name, w.FailurePolicy, w.SideEffects)
		}
		excluded := false
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpNotIn &&
				strings.Contains(strings.Join(e.Values, ","), "kube-system") && strings.Contains(strings.Join(e.Values, ","), "sds-system") {
				excluded = true
			}
		}
		if !excluded {
			t.Errorf("webhook %s: its namespaceSelector does not keep out kube-system and sds-system", w.Name)
		}
		if s := w.ClientConfig.Service; s == nil || s.Path == nil || s.Name != "sds-proxy-injector" || s.Namespace != "sds-system" {
			t.Errorf("webhook %s: clientConfig %+v, want the sds-proxy-injector Service", w.Name, w.ClientConfig)
		} else {
			paths[*s.Path] = true
		}
	}
	if !paths["/inject/namespace"] || !paths["/inject/pod"] || len(paths) != 2 {
		t.Errorf("the webhooks' paths %v, want /inject/namespace and /inject/pod, the injector's", paths)
	}
}

// checkRules fails on a wildcard, and on a write (anything but get, list,
// watch) of anything but events, the injector's Secret (create cannot be
// named) and its webhook configuration.
func checkRules(t *testing.T, who string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, r := range rules {
		all := strings.Join(append(append(append([]string{}, r.APIGroups...), r.Resources...), r.Verbs...), ",")
		if strings.Contains(all, "*") {
			t.Errorf("%s: a wildcard in %+v", who, r)
		}
		for _, v := range r.Verbs {
			if v == "get" || v == "list" || v == "watch" {
				continue
			}
			res := strings.Join(r.Resources, ",")
			switch {
			case res == "events" && v == "create", res == "secrets" && v == "create":
			case (res == "secrets" || res == "mutatingwebhookconfigurations") && len(r.ResourceNames) == 1:
			default:
				t.Errorf("%s: %s on %s %v is more than the injector writes", who, v, res, r.ResourceNames)
			}
		}
	}
}
