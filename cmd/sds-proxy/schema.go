package main

import (
	"context"
	"flag"
	"io"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/config"
)

// schema prints the JSON Schema of sds.yaml (config.Schema), which
// docs/sds.schema.json holds too: editors complete and check sds.yaml
// with it through yaml-language-server.
func schema(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("schema: unexpected arguments %q", fs.Args())
	}
	_, err := stdout.Write(config.Schema())
	return err
}
