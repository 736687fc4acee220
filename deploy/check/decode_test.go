// Package check holds the tests of deploy/: every manifest and every
// kustomize render decoded strictly into k8s.io/api types, evaluated with
// the restricted Pod Security Standard, and held to what the proxy needs.
package check

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// object is one decoded Kubernetes document.
type object struct {
	Kind, Name string
	Obj        any // a pointer to the k8s.io/api type of Kind
}

// newTyped returns an empty k8s.io/api value for apiVersion and kind, or
// nil for a kind these tests do not know (an error: they must know all).
func newTyped(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 Pod":
		return &corev1.Pod{}
	case "v1 List":
		return &corev1.List{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "admissionregistration.k8s.io/v1 MutatingWebhookConfiguration":
		return &admissionregistrationv1.MutatingWebhookConfiguration{}
	}
	return nil
}

// splitDocuments splits a YAML stream at its "---" lines, dropping
// documents that hold only comments and blank lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		for _, line := range strings.Split(cur.String(), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, bytes.Clone(cur.Bytes()))
				break
			}
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.TrimRight(line, "\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

// decodeStrict decodes every document of data into its k8s.io/api type:
// an unknown or duplicate field, a wrong type or an unknown kind is an
// error. A v1 List's items are decoded the same way, each in turn.
func decodeStrict(name string, data []byte) ([]object, error) {
	var objs []object
	for i, doc := range splitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", name, i+1, err)
		}
		typed := newTyped(tm.APIVersion, tm.Kind)
		if typed == nil {
			return nil, fmt.Errorf("%s: document %d: unknown kind %q %q", name, i+1, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, typed); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %v", name, i+1, tm.Kind, err)
		}
		if list, ok := typed.(*corev1.List); ok {
			for j, item := range list.Items {
				items, err := decodeStrict(fmt.Sprintf("%s: document %d item %d", name, i+1, j+1), item.Raw)
				if err != nil {
					return nil, err
				}
				objs = append(objs, items...)
			}
			continue
		}
		meta, err := objectMeta(typed)
		if err != nil {
			return nil, err
		}
		objs = append(objs, object{Kind: tm.Kind, Name: meta.Name, Obj: typed})
	}
	return objs, nil
}

// objectMeta returns the metadata of a value newTyped made.
func objectMeta(obj any) (*metav1.ObjectMeta, error) {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no metadata for %T", obj)
}

// podTemplate returns the pod metadata and spec an object runs, if any.
func podTemplate(o object) (*metav1.ObjectMeta, *corev1.PodSpec, bool) {
	switch v := o.Obj.(type) {
	case *corev1.Pod:
		return &v.ObjectMeta, &v.Spec, true
	case *appsv1.Deployment:
		return &v.Spec.Template.ObjectMeta, &v.Spec.Template.Spec, true
	case *appsv1.StatefulSet:
		return &v.Spec.Template.ObjectMeta, &v.Spec.Template.Spec, true
	case *appsv1.DaemonSet:
		return &v.Spec.Template.ObjectMeta, &v.Spec.Template.Spec, true
	}
	return nil, nil, false
}

// render runs kustomize on dir as `kustomize build dir` would, with the
// default options (load restrictions on, no plugins).
func render(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// TestDecodeStrictRejects: the decoder these tests trust refuses what the
// API server would refuse or silently drop.
func TestDecodeStrictRejects(t *testing.T) {
	t.Parallel()
	const head = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
	for name, doc := range map[string]string{
		"unknown field":       head + "spec: {replica: 2}\n",
		"misplaced field":     head + "spec: {template: {spec: {runAsUser: 65532}}}\n",
		"wrong type":          head + "spec: {replicas: two}\n",
		"duplicate field":     head + "spec: {replicas: 1, replicas: 2}\n",
		"unknown kind":        "apiVersion: v1\nkind: Secrett\nmetadata: {name: x}\n",
		"unknown in a List":   "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(head, "\n", "\n  ") + "spec: {replica: 2}\n",
		"unknown in a second": head + "---\n" + head + "spec: {replica: 2}\n",
	} {
		if _, err := decodeStrict(name, []byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error, want one", name)
		}
	}
	objs, err := decodeStrict("good", []byte("# a comment\n---\n"+head+"spec: {replicas: 2}\n---\n"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("good: got %d objects, %v; want 1, nil", len(objs), err)
	}
}
