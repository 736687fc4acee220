package check

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// TestFleetRedis: in the fleet overlay, every proxied pod's sds.yaml names
// a Redis Service of the render on its port, the password file it names is
// mounted in the sds-proxy container from the Secret Redis reads its
// password from, and Redis's NetworkPolicy admits the proxied pods.
func TestFleetRedis(t *testing.T) {
	t.Parallel()
	const dir = "../overlays/fleet"
	data, err := render(dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs, err := decodeStrict(dir, data)
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]*corev1.Service{}
	var policies []*networkingv1.NetworkPolicy
	var redisSecret string
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *corev1.Service:
			services[v.Name] = v
		case *networkingv1.NetworkPolicy:
			policies = append(policies, v)
		case *appsv1.Deployment:
			for _, c := range v.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if e.Name == "REDIS_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						redisSecret = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
					}
				}
			}
		}
	}
	if redisSecret == "" {
		t.Fatal("no Redis Deployment reads its password from a Secret")
	}
	proxied := 0
	for _, o := range objs {
		meta, spec, ok := podTemplate(o)
		if !ok {
			continue
		}
		proxy := findContainer(spec, sidecarName)
		if proxy == nil {
			continue
		}
		proxied++
		var cm *corev1.ConfigMap
		for _, m := range proxy.VolumeMounts {
			for _, v := range spec.Volumes {
				if m.MountPath == filepath.Dir(configArg(proxy.Args)) && v.Name == m.Name && v.ConfigMap != nil {
					cm = findConfigMap(objs, v.ConfigMap.Name)
				}
			}
		}
		if cm == nil {
			t.Fatalf("%s: no ConfigMap for the sds.yaml", o.Name)
		}
		var cfg struct {
			Cluster struct {
				Addresses    []string `json:"addresses"`
				PasswordFile string   `json:"passwordFile"`
			} `json:"cluster"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data[filepath.Base(configArg(proxy.Args))]), &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Cluster.Addresses) == 0 {
			t.Fatalf("%s: the sds.yaml has no cluster.addresses", o.Name)
		}
		for _, a := range cfg.Cluster.Addresses {
			host, port, err := net.SplitHostPort(a)
			n, _ := strconv.Atoi(port)
			svc := services[host]
			if err != nil || svc == nil || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Port != int32(n) {
				t.Errorf("%s: cluster address %q is no Service port of the render", o.Name, a)
			}
		}
		mounted := false
		for _, m := range proxy.VolumeMounts {
			if m.MountPath != filepath.Dir(cfg.Cluster.PasswordFile) {
				continue
			}
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName+"/"+filepath.Base(cfg.Cluster.PasswordFile) == redisSecret {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("%s: passwordFile %s is not mounted in %s from the Secret Redis reads (%s)", o.Name, cfg.Cluster.PasswordFile, sidecarName, redisSecret)
		}
		host, _, _ := net.SplitHostPort(cfg.Cluster.Addresses[0])
		redis := services[host]
		if redis == nil {
			t.Fatalf("%s: no Service %q in the render", o.Name, host)
		}
		admitted := false
		for _, np := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(redis.Spec.Selector)) {
				continue
			}
			for _, rule := range np.Spec.Ingress {
				for _, from := range rule.From {
					if from.PodSelector == nil {
						continue
					}
					if s, err := metav1.LabelSelectorAsSelector(from.PodSelector); err == nil && s.Matches(labels.Set(meta.Labels)) {
						admitted = true
					}
				}
			}
		}
		if !admitted {
			t.Errorf("%s: no NetworkPolicy of Redis admits the proxied pods", o.Name)
		}
	}
	if proxied == 0 {
		t.Errorf("no pod runs %s", sidecarName)
	}
}
