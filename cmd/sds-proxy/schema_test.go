package main

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/sds-proxy/sds-proxy/config"
)

// TestSchemaCommand: sds-proxy schema prints config.Schema, which is what
// docs/sds.schema.json holds (config's TestSchemaFileIsCurrent).
func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"schema"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), config.Schema()) {
		t.Errorf("schema printed %d bytes, want config.Schema()'s %d", stdout.Len(), len(config.Schema()))
	}
	file, err := os.ReadFile("../../docs/sds.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), file) {
		t.Errorf("schema differs from docs/sds.schema.json; regenerate it: go run ./cmd/sds-proxy schema > docs/sds.schema.json")
	}
}
