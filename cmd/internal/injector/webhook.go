package injector

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/cmd/internal/inject"
)

// The webhook's paths, one per webhook of its MutatingWebhookConfiguration
// (deploy/components/injector): the apiserver calls PathNamespace for the
// pods of namespaces labelled sds-proxy.io/inject=enabled, and PathPod for
// the pods of the others, which it injects only when annotated so. The
// namespace's label is thus read by the apiserver's namespaceSelector, and
// a review needs no call back to the apiserver.
const (
	PathNamespace = "/inject/namespace"
	PathPod       = "/inject/pod"
)

// maxReview bounds an AdmissionReview's body, in bytes: the apiserver's
// own limit on an object is 1.5 MiB, and a review carries one object.
const maxReview = 8 << 20

// The AdmissionReview of admission.k8s.io/v1, the fields the injector
// reads and writes (deploy/check decodes them with k8s.io/api's own types:
// TestInjectorReviewDifferential).
type (
	review struct {
		APIVersion string    `json:"apiVersion"`
		Kind       string    `json:"kind"`
		Request    *request  `json:"request,omitempty"`
		Response   *response `json:"response,omitempty"`
	}
	request struct {
		UID         string          `json:"uid"`
		Kind        groupKind       `json:"kind"`
		SubResource string          `json:"subResource,omitempty"`
		Name        string          `json:"name,omitempty"`
		Namespace   string          `json:"namespace,omitempty"`
		Operation   string          `json:"operation"`
		Object      json.RawMessage `json:"object,omitempty"`
	}
	groupKind struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	}
	response struct {
		UID       string   `json:"uid"`
		Allowed   bool     `json:"allowed"`
		Result    *result  `json:"status,omitempty"`
		PatchType string   `json:"patchType,omitempty"`
		Patch     []byte   `json:"patch,omitempty"` // base64 in JSON, as the API wants
		Warnings  []string `json:"warnings,omitempty"`
	}
	result struct {
		Code    int32  `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
)

// podMeta is what a review reads of the pod before the transform.
type podMeta struct {
	Metadata struct {
		Name         string            `json:"name"`
		GenerateName string            `json:"generateName"`
		Annotations  map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		HostNetwork bool `json:"hostNetwork"`
	} `json:"spec"`
}

// name is the pod's name, or its generateName and "*" before it has one.
func (p podMeta) name() string {
	if p.Metadata.Name != "" {
		return p.Metadata.Name
	}
	return p.Metadata.GenerateName + "*"
}

// Webhook answers the apiserver's AdmissionReviews for pods being created:
// it injects the sidecar, as `sds-proxy inject` does (inject.PodPatch),
// into each pod it should (review). Its methods are safe for concurrent
// use.
type Webhook struct {
	// Options are the sidecar's defaults, which a pod's annotations
	// override (inject.PodOptions).
	Options inject.Options
	// Version is written into inject.AnnotationInjected.
	Version string
	Log     *zap.Logger
	reviews *prometheus.CounterVec // outcome
}

// The outcomes of a review, for sds_injector_reviews_total.
const (
	outcomeInjected  = "injected"  // patched
	outcomePresent   = "present"   // the sidecar was there already
	outcomeOptedOut  = "opted_out" // annotated disabled
	outcomeNotAsked  = "not_asked" // PathPod, not annotated enabled
	outcomeSkipped   = "skipped"   // not a pod creation, kube-system, hostNetwork
	outcomeDenied    = "denied"    // a pod the sidecar cannot join, or bad annotations
	outcomeMalformed = "malformed" // not an AdmissionReview
)

// NewWebhook returns a Webhook whose metrics (sds_injector_reviews_total)
// reg registers; nil registers none.
func NewWebhook(o inject.Options, version string, log *zap.Logger, reg prometheus.Registerer) *Webhook {
	w := &Webhook{Options: o, Version: version, Log: log,
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_injector_reviews_total",
			Help: "AdmissionReviews answered by outcome: injected, present (the sidecar was there), opted_out, not_asked (no annotation outside a labelled namespace), skipped (not a pod creation, kube-system, hostNetwork), denied, malformed.",
		}, []string{"outcome"})}
	for _, o := range []string{outcomeInjected, outcomePresent, outcomeOptedOut, outcomeNotAsked, outcomeSkipped, outcomeDenied, outcomeMalformed} {
		w.reviews.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(w.reviews)
	}
	return w
}

// ServeHTTP answers one AdmissionReview POSTed to PathNamespace or
// PathPod. A request that is not one is answered 4xx and counted as
// malformed; a review is always answered 200 with its response.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	scope := r.URL.Path
	if scope != PathNamespace && scope != PathPod {
		http.NotFound(rw, r)
		return
	}
	fail := func(code int, msg string) {
		w.reviews.WithLabelValues(outcomeMalformed).Inc()
		http.Error(rw, msg, code)
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "POST an AdmissionReview")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		fail(http.StatusUnsupportedMediaType, "an AdmissionReview comes as application/json")
		return
	}
	var in review
	dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, maxReview))
	if err := dec.Decode(&in); err != nil {
		code := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			code = http.StatusRequestEntityTooLarge
		}
		fail(code, "not an AdmissionReview: "+err.Error())
		return
	}
	if in.APIVersion != "admission.k8s.io/v1" || in.Kind != "AdmissionReview" || in.Request == nil || in.Request.UID == "" {
		fail(http.StatusBadRequest, "want an admission.k8s.io/v1 AdmissionReview with a request and its uid")
		return
	}
	resp, outcome, pod := w.review(scope, in.Request)
	w.reviews.WithLabelValues(outcome).Inc()
	if outcome == outcomeDenied || outcome == outcomeInjected {
		w.Log.Info("review", zap.String("outcome", outcome), zap.String("namespace", in.Request.Namespace),
			zap.String("pod", pod), zap.String("uid", in.Request.UID), zap.Stringp("denied", message(resp)))
	}
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(review{APIVersion: in.APIVersion, Kind: in.Kind, Response: resp})
}

// message is a denied response's message, nil for another.
func message(r *response) *string {
	if r.Result == nil {
		return nil
	}
	return &r.Result.Message
}

// review decides one request of scope (PathNamespace or PathPod): the
// response, its outcome and the pod's name (its generateName and "*"
// before the apiserver names it). It never touches kube-system, and injects
// only a pod being created, unless annotated disabled, and, outside a
// labelled namespace, only when annotated enabled. A pod the sidecar
// cannot join is denied with why and how to opt out; a hostNetwork pod is
// left alone with a warning.
func (w *Webhook) review(scope string, req *request) (*response, string, string) {
	resp := &response{UID: req.UID, Allowed: true}
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.Operation != "CREATE" || req.SubResource != "" || req.Namespace == "kube-system" {
		return resp, outcomeSkipped, req.Name
	}
	var pod podMeta
	deny := func(format string, args ...any) (*response, string, string) {
		resp.Allowed = false
		resp.Result = &result{Code: http.StatusBadRequest, Message: "sds-proxy injector: " + fmt.Sprintf(format, args...)}
		return resp, outcomeDenied, pod.name()
	}
	if err := json.Unmarshal(req.Object, &pod); err != nil {
		return deny("the request's object is not a pod: %v", err)
	}
	switch v := strings.ToLower(strings.TrimSpace(pod.Metadata.Annotations[inject.AnnotationInject])); v {
	case "disabled", "false":
		return resp, outcomeOptedOut, pod.name()
	case "enabled", "true":
	case "":
		if scope == PathPod {
			return resp, outcomeNotAsked, pod.name()
		}
	default:
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("sds-proxy injector: annotation %s: %q is neither enabled nor disabled; read as not set", inject.AnnotationInject, v))
		if scope == PathPod {
			return resp, outcomeNotAsked, pod.name()
		}
	}
	if pod.Spec.HostNetwork {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("sds-proxy injector: pod %s is on the node's network: not injected (the sidecar's ports would collide across pods)", pod.name()))
		return resp, outcomeSkipped, pod.name()
	}
	o, err := inject.PodOptions(w.Options, pod.Metadata.Annotations)
	if err != nil {
		return deny("pod %s: %s", pod.name(), oneLine(err))
	}
	patch, err := inject.PodPatch(req.Object, o, w.Version)
	if err != nil {
		return deny("pod %s cannot take the sidecar: %s; fix it, or keep it out with the annotation %s: disabled", pod.name(), oneLine(err), inject.AnnotationInject)
	}
	if patch == nil {
		return resp, outcomePresent, pod.name()
	}
	resp.PatchType, resp.Patch = "JSONPatch", patch
	return resp, outcomeInjected, pod.name()
}

// oneLine joins an error's lines with "; ".
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
