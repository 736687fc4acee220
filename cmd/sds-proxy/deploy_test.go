package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sds-proxy/sds-proxy/config"
)

// TestDeployConfigMapsValidate: every sds.yaml embedded in a ConfigMap
// under deploy/ is a valid config, so a user who applies any of the
// kustomizations gets a running proxy. (deploy/check, a module of its own,
// checks the manifests against the Kubernetes API types.)
func TestDeployConfigMapsValidate(t *testing.T) {
	t.Parallel()
	found := 0
	err := filepath.WalkDir("../../deploy", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := yaml.NewDecoder(f)
		for {
			var node yaml.Node
			err := dec.Decode(&node)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			if len(node.Content) == 0 || node.Content[0].Kind != yaml.MappingNode {
				continue
			}
			var doc struct {
				Kind string            `yaml:"kind"`
				Data map[string]string `yaml:"data"`
			}
			if err := node.Decode(&doc); err != nil || doc.Kind != "ConfigMap" {
				continue
			}
			src, ok := doc.Data["sds.yaml"]
			if !ok {
				continue
			}
			found++
			if _, err := config.Parse(path+":sds.yaml", []byte(src), config.Options{}); err != nil {
				t.Errorf("%s: the ConfigMap's sds.yaml is invalid:\n%v", path, err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 2 {
		t.Errorf("found %d ConfigMaps with an sds.yaml under deploy/, want the base's and the component's", found)
	}
}
