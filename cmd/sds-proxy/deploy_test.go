package main

import (
	"errors"
	"io"
	"os"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sds-proxy/sds-proxy/config"
)

// TestDeployConfigMapValidates: the sds.yaml shipped in the Kubernetes
// example is a valid config, so a user who applies it gets a running proxy.
func TestDeployConfigMapValidates(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../deploy/kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	found := 0
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("deploy/kubernetes.yaml: %v", err)
		}
		if doc.Kind != "ConfigMap" {
			continue
		}
		found++
		if _, err := config.Parse("configmap/sds.yaml", []byte(doc.Data["sds.yaml"]), config.Options{}); err != nil {
			t.Errorf("the ConfigMap's sds.yaml is invalid:\n%v", err)
		}
	}
	if found != 1 {
		t.Errorf("found %d ConfigMaps, want 1", found)
	}
}
