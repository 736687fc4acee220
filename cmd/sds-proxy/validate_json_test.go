package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
)

// TestValidateJSON: validate -o json on each broken config of the test
// data (config/testdata/broken) and on a valid one with a warning prints
// the document of its golden file (go test -run TestValidateJSON -update
// rewrites them), with the exit code of the text output: cli.ErrInvalid
// (exit 1) for a broken file, success for warnings alone.
func TestValidateJSON(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("../../config/testdata/broken/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no broken configs: %v", err)
	}
	paths = append(paths, "testdata/validate-json/warnings.yaml")
	for _, path := range paths {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"validate", "-o", "json", "-config", path}, &stdout, &stderr)
		var doc validation
		if jsonErr := json.Unmarshal(stdout.Bytes(), &doc); jsonErr != nil {
			t.Errorf("%s: the output is not a validation document: %v\n%s", path, jsonErr, stdout.String())
			continue
		}
		broken := strings.Contains(path, "/broken/")
		if broken != errors.Is(err, cli.ErrInvalid) || !broken && err != nil || doc.Valid == broken {
			t.Errorf("%s: got error %v and valid %v, want cli.ErrInvalid %v", path, err, doc.Valid, broken)
		}
		if len(doc.Problems) == 0 || stderr.Len() > 0 {
			t.Errorf("%s: got %d problems and stderr %q, want problems and no stderr", path, len(doc.Problems), stderr.String())
		}
		golden := filepath.Join("testdata/validate-json", strings.TrimSuffix(filepath.Base(path), ".yaml")+".json")
		if *updateGolden {
			if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s: %v (go test -run TestValidateJSON -update writes it)", path, err)
			continue
		}
		if !bytes.Equal(stdout.Bytes(), want) {
			t.Errorf("%s: got\n%s\nwant (%s)\n%s", path, stdout.String(), golden, want)
		}
	}
}

// TestValidateJSONMatchesText: each problem of the JSON output is a line
// of the text output, FILE:LINE:COL: message, in the same order.
func TestValidateJSONMatchesText(t *testing.T) {
	t.Parallel()
	paths, _ := filepath.Glob("../../config/testdata/broken/*.yaml")
	for _, path := range paths {
		var text, js bytes.Buffer
		run(context.Background(), []string{"validate", "-config", path}, &text, &bytes.Buffer{})
		run(context.Background(), []string{"validate", "-o", "json", "-config", path}, &js, &bytes.Buffer{})
		var doc validation
		if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var lines []string
		for _, p := range doc.Problems {
			msg := p.Message
			if p.Warning {
				msg = "warning: " + msg
			}
			line := p.File + ": " + msg
			if p.Line > 0 {
				line = fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, msg)
			}
			lines = append(lines, line)
		}
		if got, want := strings.Join(lines, "\n")+"\n", text.String(); got != want {
			t.Errorf("%s: JSON problems as lines:\n%s\nwant the text output:\n%s", path, got, want)
		}
	}
}

// TestValidateOutputFlag: -o takes text or json, and json does not
// combine with -diff.
func TestValidateOutputFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		why  string
	}{
		{[]string{"-o", "yaml"}, `-o "yaml": want text or json`},
		{[]string{"-o", "json", "-diff", "127.0.0.1:9901"}, "-o json does not combine with -diff"},
	} {
		err := run(context.Background(), append([]string{"validate"}, tc.args...), &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%q: got %v, want cli.ErrUsage with %q", tc.args, err, tc.why)
		}
	}
}
