package injector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/cmd/internal/inject"
)

// The event the reporter records on a pod that should have the sidecar
// and has none.
const (
	eventReason  = "SidecarNotInjected"
	eventMessage = "running without the sds-proxy sidecar though its namespace's label or its annotation " +
		inject.AnnotationInject + " asks for it: it was admitted while the sds-proxy injector did not answer " +
		"(down or unreachable: its webhook fails open, failurePolicy Ignore), or before the namespace was labelled. " +
		"Recreate it to inject it: kubectl rollout restart its workload, or delete the pod"
	component = "sds-proxy-injector"
)

// reporter watches the cluster's pods and records a Warning event,
// eventReason, on each that should have the sidecar and has none: the
// trace of a pod admitted while the webhook failed open, which the
// apiserver itself only logs. It needs list and watch on pods, get on
// namespaces and create on events (rbac.yaml).
type reporter struct {
	k        *kube
	log      *zap.Logger
	instance string // this replica, the events' reportingInstance
	now      func() time.Time
	reported prometheus.Counter

	mu         sync.Mutex
	namespaces map[string]nsLabel // by name
	// done holds the UIDs of the pods reported (or found reported) since
	// the last list, so that a pod's every status change does not post
	// its event again; a pod's deletion forgets it.
	done map[string]bool
}

// nsLabel is a namespace's inject label as read at some instant.
type nsLabel struct {
	enabled bool
	at      time.Time
}

// nsTTL is how long a namespace's label, once read, is taken as it was.
const nsTTL = 30 * time.Second

// watchPod is the part of a pod the reporter reads.
type watchPod struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		HostNetwork    bool                    `json:"hostNetwork"`
		Containers     []struct{ Name string } `json:"containers"`
		InitContainers []struct{ Name string } `json:"initContainers"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// hasSidecar reports whether the pod has a container named as the
// sidecar, in either list.
func (p *watchPod) hasSidecar() bool {
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if c.Name == "sds-proxy" {
			return true
		}
	}
	return false
}

// run lists the pods, checks each, and watches for more until ctx is
// done, listing again when the watch's resource version is gone.
func (r *reporter) run(ctx context.Context) {
	for ctx.Err() == nil {
		// A new list starts a new memory of the pods reported: the
		// deletions missed meanwhile cannot leave UIDs behind for good.
		r.mu.Lock()
		r.done = map[string]bool{}
		r.mu.Unlock()
		rv, err := r.list(ctx)
		for err == nil {
			rv, err = r.watch(ctx, rv)
		}
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, errGone) {
			r.log.Warn("watching pods for the not-injected ones", zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}
}

// errGone: the watch's resource version is too old; list again.
var errGone = errors.New("resource version gone")

// list checks every pod, 500 at a time, and returns the list's resource
// version. It reads the apiserver's watch cache (resourceVersion=0, as
// client-go's informers do): the watch that follows starts from a version
// the cache has. A list read from etcd can be ahead of the cache, and a
// watch from it is refused ("Too large resource version") until a pod
// changes, where etcd does not send progress notifications.
func (r *reporter) list(ctx context.Context) (string, error) {
	cont := ""
	for {
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []watchPod `json:"items"`
		}
		path := "/api/v1/pods?limit=500&resourceVersion=0"
		if cont != "" {
			path += "&continue=" + url.QueryEscape(cont)
		}
		if err := r.k.do(ctx, http.MethodGet, path, "", nil, &page); err != nil {
			return "", err
		}
		for i := range page.Items {
			r.check(ctx, &page.Items[i])
		}
		if cont = page.Metadata.Continue; cont == "" {
			return page.Metadata.ResourceVersion, nil
		}
	}
}

// watch checks each pod added or changed from resource version rv on, for
// at most five minutes, and returns the last resource version seen.
func (r *reporter) watch(ctx context.Context, rv string) (string, error) {
	resp, err := r.k.open(ctx, http.MethodGet, "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion="+url.QueryEscape(rv), "", nil)
	if err != nil {
		if isStatus(err, http.StatusGone) {
			return rv, errGone
		}
		return rv, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return rv, ctx.Err()
			}
			return rv, nil // the watch's end: watch again from rv
		}
		switch ev.Type {
		case "DELETED":
			var p watchPod
			if json.Unmarshal(ev.Object, &p) == nil {
				r.mu.Lock()
				delete(r.done, p.Metadata.UID)
				r.mu.Unlock()
			}
		case "ADDED", "MODIFIED", "BOOKMARK":
			var p watchPod
			if err := json.Unmarshal(ev.Object, &p); err != nil {
				return rv, fmt.Errorf("a watch event: %w", err)
			}
			rv = p.Metadata.ResourceVersion
			if ev.Type != "BOOKMARK" {
				r.check(ctx, &p)
			}
		case "ERROR":
			var st struct{ Code int }
			json.Unmarshal(ev.Object, &st)
			if st.Code == http.StatusGone {
				return rv, errGone
			}
			return rv, fmt.Errorf("the watch of pods: %s", ev.Object)
		}
	}
}

// check records the event on p when it should have the sidecar and has
// none: not in kube-system, not on the node's network, running or about
// to, not annotated disabled, and annotated enabled or in a namespace
// labelled so. The event's name is the pod's: a pod is reported once,
// whatever the injector's restarts.
func (r *reporter) check(ctx context.Context, p *watchPod) {
	m := p.Metadata
	if m.Namespace == "kube-system" || p.Spec.HostNetwork || p.hasSidecar() || p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed" {
		return
	}
	r.mu.Lock()
	seen := r.done[m.UID]
	r.mu.Unlock()
	if seen {
		return
	}
	switch strings.ToLower(strings.TrimSpace(m.Annotations[inject.AnnotationInject])) {
	case "disabled", "false":
		return
	case "enabled", "true":
	default:
		if !r.namespaceEnabled(ctx, m.Namespace) {
			return
		}
	}
	now := r.now().UTC().Format(time.RFC3339)
	name := m.Name + ".sds-proxy-not-injected"
	if len(name) > 253 { // a DNS subdomain's most: the pod's UID is shorter
		name = "sds-proxy-not-injected." + m.UID
	}
	ev := map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]string{"name": name, "namespace": m.Namespace},
		"involvedObject": map[string]string{"apiVersion": "v1", "kind": "Pod", "name": m.Name, "namespace": m.Namespace, "uid": m.UID},
		"type":           "Warning", "reason": eventReason, "message": eventMessage,
		"source":         map[string]string{"component": component},
		"firstTimestamp": now, "lastTimestamp": now, "count": 1,
		"reportingComponent": component, "reportingInstance": r.instance,
	}
	err := r.k.do(ctx, http.MethodPost, "/api/v1/namespaces/"+m.Namespace+"/events", "application/json", ev, nil)
	if err == nil || isStatus(err, http.StatusConflict) {
		r.mu.Lock()
		r.done[m.UID] = true
		r.mu.Unlock()
	}
	switch {
	case err == nil:
		r.reported.Inc()
		r.log.Warn("a pod runs without the sidecar its namespace or annotation asks for: event recorded",
			zap.String("namespace", m.Namespace), zap.String("pod", m.Name), zap.String("reason", eventReason))
	case isStatus(err, http.StatusConflict):
		// Reported before (by this replica before a restart, or another).
	default:
		r.log.Warn("recording the not-injected event", zap.String("namespace", m.Namespace), zap.String("pod", m.Name), zap.Error(err))
	}
}

// namespaceEnabled reports whether the namespace is labelled for
// injection, as read at most nsTTL ago.
func (r *reporter) namespaceEnabled(ctx context.Context, name string) bool {
	r.mu.Lock()
	l, ok := r.namespaces[name]
	r.mu.Unlock()
	if ok && r.now().Sub(l.at) < nsTTL {
		return l.enabled
	}
	var ns struct{ Metadata objectMeta }
	if err := r.k.do(ctx, http.MethodGet, "/api/v1/namespaces/"+name, "", nil, &ns); err != nil {
		r.log.Warn("reading a namespace's label", zap.String("namespace", name), zap.Error(err))
		return false
	}
	enabled := ns.Metadata.Labels[inject.LabelInject] == "enabled"
	r.mu.Lock()
	r.namespaces[name] = nsLabel{enabled: enabled, at: r.now()}
	r.mu.Unlock()
	return enabled
}
