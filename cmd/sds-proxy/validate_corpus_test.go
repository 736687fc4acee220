package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusGolden holds validate -o json's document for each file of the
// config package's golden corpus (config/testdata/golden), one after the
// other, each after a line "== NAME".
const corpusGolden = "testdata/validate-json/corpus.golden"

// TestValidateJSONCorpus: validate -o json prints, for every file of the
// golden corpus, the document kept in corpusGolden (go test -run
// TestValidateJSONCorpus -update rewrites it). The config package's
// TestGolden pins the text form of the same files.
func TestValidateJSONCorpus(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("../../config/testdata/golden/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden corpus: %v", err)
	}
	var got bytes.Buffer
	for _, path := range paths {
		got.WriteString("== " + filepath.Base(path) + "\n")
		run(context.Background(), []string{"validate", "-o", "json", "-config", path}, &got, &bytes.Buffer{})
	}
	if *updateGolden {
		if err := os.WriteFile(corpusGolden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(corpusGolden)
	if err != nil {
		t.Fatalf("%v (go test -run TestValidateJSONCorpus -update writes it)", err)
	}
	if bytes.Equal(got.Bytes(), want) {
		return
	}
	gotCases, wantCases := strings.Split(got.String(), "== "), strings.Split(string(want), "== ")
	if len(gotCases) != len(wantCases) {
		t.Fatalf("got %d documents, want %d", len(gotCases)-1, len(wantCases)-1)
	}
	for i := range gotCases {
		if gotCases[i] != wantCases[i] {
			t.Errorf("got\n%s\nwant\n%s", gotCases[i], wantCases[i])
		}
	}
}
