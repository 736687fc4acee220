package injector

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/cmd/internal/inject"
)

var testSidecar = inject.Options{Image: "registry.example/sds-proxy:1.0", ConfigMap: "sds-proxy", ProxyPort: 8080, AdminPort: 9901}

// reviewOf returns an AdmissionReview of a pod's creation in namespace.
func reviewOf(namespace, pod string) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"namespace":"` + namespace + `","operation":"CREATE","object":` + pod + `}}`)
}

// post sends body to the webhook at path and returns the status and the
// decoded response (nil unless 200).
func post(t *testing.T, w *Webhook, path string, body []byte) (int, *response) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var out review
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	return rec.Code, out.Response
}

const plainPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","annotations":%s},"spec":{"containers":[{"name":"app","image":"app:1","ports":[{"containerPort":9000}]}]}}`

func podWith(annotations string) string { return strings.Replace(plainPod, "%s", annotations, 1) }

// TestReview: who is injected. A labelled namespace's pods, unless
// annotated disabled; elsewhere only pods annotated enabled; never
// kube-system, a hostNetwork pod (a warning), an update or another kind.
// A pod that cannot take the sidecar, or whose annotations are wrong, is
// denied with why; one that has it already is left as it is.
func TestReview(t *testing.T) {
	t.Parallel()
	hostNet := `{"metadata":{"name":"h"},"spec":{"hostNetwork":true,"containers":[{"name":"app"}]}}`
	clash := `{"metadata":{"name":"c"},"spec":{"containers":[{"name":"app","ports":[{"containerPort":9901}]}]}}`
	for _, tc := range []struct {
		name, path, namespace, pod string
		outcome                    string
		want                       string // in the denial or a warning
	}{
		{"labelled namespace", PathNamespace, "shop", podWith(`{}`), outcomeInjected, ""},
		{"labelled, opted out", PathNamespace, "shop", podWith(`{"sds-proxy.io/inject":"disabled"}`), outcomeOptedOut, ""},
		{"labelled, typo", PathNamespace, "shop", podWith(`{"sds-proxy.io/inject":"yes"}`), outcomeInjected, `"yes" is neither enabled nor disabled`},
		{"other namespace, annotated", PathPod, "shop", podWith(`{"sds-proxy.io/inject":"enabled"}`), outcomeInjected, ""},
		{"other namespace, not annotated", PathPod, "shop", podWith(`{}`), outcomeNotAsked, ""},
		{"kube-system", PathNamespace, "kube-system", podWith(`{"sds-proxy.io/inject":"enabled"}`), outcomeSkipped, ""},
		{"hostNetwork", PathNamespace, "shop", hostNet, outcomeSkipped, "on the node's network"},
		{"port clash", PathNamespace, "shop", clash, outcomeDenied, "already uses port 9901"},
		{"bad annotation", PathNamespace, "shop", podWith(`{"sds-proxy.io/proxy-port":"web"}`), outcomeDenied, `"web" is not a port number`},
		{"moved ports", PathNamespace, "shop", podWith(`{"sds-proxy.io/proxy-port":"8081","sds-proxy.io/admin-port":"9902"}`), outcomeInjected, ""},
		{"not a pod", PathNamespace, "shop", `"a string"`, outcomeDenied, "not a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := NewWebhook(testSidecar, "v9", zap.NewNop(), nil)
			code, resp := post(t, w, tc.path, reviewOf(tc.namespace, tc.pod))
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			if got := testutil.ToFloat64(w.reviews.WithLabelValues(tc.outcome)); got != 1 {
				t.Errorf("outcome %s counted %v times, want 1", tc.outcome, got)
			}
			if resp.UID != "u-1" || resp.Allowed != (tc.outcome != outcomeDenied) {
				t.Errorf("response %+v: want uid u-1, allowed %v", resp, tc.outcome != outcomeDenied)
			}
			if (resp.Patch != nil) != (tc.outcome == outcomeInjected) || resp.Patch != nil && resp.PatchType != "JSONPatch" {
				t.Errorf("patch %q (%s), want one only when injected", resp.Patch, resp.PatchType)
			}
			said := strings.Join(resp.Warnings, "\n")
			if resp.Result != nil {
				said += resp.Result.Message
			}
			if !strings.Contains(said, tc.want) {
				t.Errorf("the response says %q, want %q in it", said, tc.want)
			}
		})
	}
}

// TestReviewTwice: a pod the webhook patched, reviewed again (a second
// webhook's change makes the apiserver call it again), is left alone.
func TestReviewTwice(t *testing.T) {
	t.Parallel()
	w := NewWebhook(testSidecar, "v9", zap.NewNop(), nil)
	_, resp := post(t, w, PathNamespace, reviewOf("shop", podWith(`{}`)))
	var ops []struct {
		Op, Path string
		Value    json.RawMessage
	}
	if err := json.Unmarshal(resp.Patch, &ops); err != nil || len(ops) != 2 {
		t.Fatalf("patch %s: %v", resp.Patch, err)
	}
	patched := `{"metadata":{"name":"web-1","annotations":{"sds-proxy.io/injected":"v9"}},"spec":` + string(ops[0].Value) + `}`
	if _, again := post(t, w, PathNamespace, reviewOf("shop", patched)); !again.Allowed || again.Patch != nil {
		t.Errorf("the patched pod reviewed again: %+v, want allowed with no patch", again)
	}
}

// TestReviewMalformed: what is not an AdmissionReview POSTed as JSON to
// one of the two paths is answered 4xx, and counted.
func TestReviewMalformed(t *testing.T) {
	t.Parallel()
	w := NewWebhook(testSidecar, "v9", zap.NewNop(), nil)
	for _, tc := range []struct {
		method, path, contentType, body string
		code                            int
	}{
		{"POST", "/other", "application/json", "{}", 404},
		{"GET", PathPod, "application/json", "", 405},
		{"POST", PathPod, "text/plain", "{}", 415},
		{"POST", PathPod, "application/json", "{", 400},
		{"POST", PathPod, "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`, 400},
		{"POST", PathPod, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400},
		{"POST", PathPod, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}`, 400},
		{"POST", PathPod, "application/json", `"` + strings.Repeat("a", maxReview) + `"`, 413},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		w.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s %s (%s) %.40q: status %d, want %d", tc.method, tc.path, tc.contentType, tc.body, rec.Code, tc.code)
		}
	}
	if got := testutil.ToFloat64(w.reviews.WithLabelValues(outcomeMalformed)); got != 7 {
		t.Errorf("malformed counted %v, want 7 (the 404 is not a review's)", got)
	}
}

// FuzzReview: whatever pod a review carries, the webhook answers 200 with
// the request's uid, never panics, and a patch it returns is a JSON array
// of operations.
func FuzzReview(f *testing.F) {
	for _, p := range []string{podWith(`{}`), podWith(`{"sds-proxy.io/inject":"enabled","sds-proxy.io/admin-port":"1"}`),
		`{"spec":{"containers":null}}`, `{"spec":{"initContainers":[{"name":"sds-proxy","image":"x"}],"containers":[{}]}}`,
		`{"metadata":{"annotations":null},"spec":{"containers":[{"name":"a"}],"volumes":{}}}`, `null`, `[]`, `{"spec":[]}`} {
		f.Add(p)
	}
	w := NewWebhook(testSidecar, "v9", zap.NewNop(), nil)
	f.Fuzz(func(t *testing.T, pod string) {
		if !json.Valid([]byte(pod)) {
			return
		}
		code, resp := post(t, w, PathNamespace, reviewOf("shop", pod))
		if code != 200 || resp.UID != "u-1" {
			t.Fatalf("status %d, response %+v", code, resp)
		}
		if resp.Patch != nil {
			var ops []map[string]any
			if err := json.Unmarshal(resp.Patch, &ops); err != nil || len(ops) == 0 {
				t.Fatalf("patch %s: %v", resp.Patch, err)
			}
		}
	})
}

// TestServingCert: a made certificate serves its names for its life, not
// another name, and validFor says so; a CA and key that do not match are
// refused.
func TestServingCert(t *testing.T) {
	t.Parallel()
	now := time.Now()
	names := []string{"sds-proxy-injector.sds-system.svc", "sds-proxy-injector.sds-system.svc.cluster.local"}
	sc, err := newServingCert(names, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.validFor(names, now); err != nil {
		t.Errorf("a new certificate: %v", err)
	}
	if err := sc.validFor([]string{"other.sds-system.svc"}, now); err == nil {
		t.Error("valid for a name it does not carry")
	}
	if err := sc.validFor(names, now.Add(certLife-certRenew/2)); err == nil {
		t.Error("valid though it ends within certRenew")
	}
	other, _ := newServingCert(names, now)
	if err := (servingCert{CA: other.CA, Cert: sc.Cert, Key: sc.Key}).validFor(names, now); err == nil {
		t.Error("valid under another CA")
	}
	if err := (servingCert{CA: sc.CA, Cert: sc.Cert, Key: other.Key}).validFor(names, now); err == nil {
		t.Error("valid with another key")
	}
}
