package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The annotations a pod (or a pod template) carries for the injector
// (`sds-proxy injector`, docs/kubernetes.md).
const (
	// AnnotationInject is "enabled" to inject a pod of a namespace that is
	// not labelled, "disabled" to keep one of a labelled namespace out.
	AnnotationInject = "sds-proxy.io/inject"
	// AnnotationConfigMap, AnnotationImage, AnnotationProxyPort and
	// AnnotationAdminPort override the injector's -configmap, -image,
	// -proxy-port and -admin-port for one pod.
	AnnotationConfigMap = "sds-proxy.io/configmap"
	AnnotationImage     = "sds-proxy.io/image"
	AnnotationProxyPort = "sds-proxy.io/proxy-port"
	AnnotationAdminPort = "sds-proxy.io/admin-port"
	// AnnotationInjected is set on a pod the injector changed, to the
	// injector's version.
	AnnotationInjected = "sds-proxy.io/injected"
	// LabelInject on a namespace, "enabled", injects its pods.
	LabelInject = "sds-proxy.io/inject"
)

// PodOptions returns o as a pod's annotations override it
// (AnnotationConfigMap and the others), or what is wrong with them.
func PodOptions(o Options, annotations map[string]string) (Options, error) {
	var errs []error
	if v, ok := annotations[AnnotationConfigMap]; ok {
		o.ConfigMap = v
	}
	if v, ok := annotations[AnnotationImage]; ok {
		o.Image = v
	}
	for _, p := range []struct {
		key string
		to  *int
	}{{AnnotationProxyPort, &o.ProxyPort}, {AnnotationAdminPort, &o.AdminPort}} {
		v, ok := annotations[p.key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not a port number", p.key, v))
			continue
		}
		*p.to = n
	}
	if err := o.check(); err != nil {
		// The flags' names, as the annotations that set them.
		msg := strings.NewReplacer("-configmap", AnnotationConfigMap, "-image", AnnotationImage,
			"-proxy-port", AnnotationProxyPort, "-admin-port", AnnotationAdminPort).Replace(err.Error())
		errs = append(errs, errors.New(msg))
	}
	return o, errors.Join(errs...)
}

// Check returns what is wrong with o, one problem a line, as inject's
// flags name them.
func (o Options) Check() error { return o.check() }

// patchOp is one operation of a JSON Patch (RFC 6902).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// PodPatch returns the JSON Patch (RFC 6902) that injects the sidecar into
// pod, a Pod in JSON (an admission request's object), as YAML injects a
// Pod document: the same transform, so the webhook and `sds-proxy inject`
// add the same containers, volumes and security context. The patch
// replaces the spec and adds AnnotationInjected set to version. It returns
// nil when the pod has the sidecar and its volumes already, and an error
// for a pod it cannot inject (hostNetwork, a port or name the sidecar
// needs in use, not a Pod).
func PodPatch(pod []byte, o Options, version string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(pod, &doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("not a pod in JSON: %v", err)
	}
	obj := doc.Content[0]
	spec := mapGet(obj, "spec")
	if obj.Kind != yaml.MappingNode || spec == nil || spec.Kind != yaml.MappingNode {
		return nil, errors.New("not a pod: no spec")
	}
	changed, err := injectPod(spec, o)
	if err != nil || !changed {
		return nil, err
	}
	var value any
	if err := spec.Decode(&value); err != nil {
		return nil, fmt.Errorf("the injected spec: %v", err)
	}
	ops := []patchOp{{Op: "replace", Path: "/spec", Value: value}}
	if ann := mapGet(mapGet(obj, "metadata"), "annotations"); ann == nil || ann.Kind != yaml.MappingNode {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AnnotationInjected: version}})
	} else {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations/" + jsonPointerEscape(AnnotationInjected), Value: version})
	}
	return json.Marshal(ops)
}

// jsonPointerEscape escapes s as one reference token of a JSON Pointer
// (RFC 6901): "~" as "~0", "/" as "~1".
func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
